"""Server-side scripts: one way in, Redis Functions where the server has them.

A module's Lua scripts form one :class:`Library`. On Redis 7 it is a Functions library
(``FUNCTION LOAD REPLACE``, one per master of a cluster), which Redis replicates to the
replicas and keeps in its RDB/AOF, so a replica that takes over, or a restarted server,
still has it; a call is ``FCALL``. On a server without Functions (the embedded Redis,
6.2) the same scripts run by ``EVALSHA``. Either way a call that finds its script missing
(a server restarted without persistence, a master added to a cluster, the first call
ever) loads the library and is sent again: no ``SCRIPT EXISTS`` round trip before each
call, as redis-py's ``Script`` adds in a pipeline, and nothing redis-py's cluster pipeline
refuses. Library and function names carry a hash of the code, so two versions of Caravel
running side by side (a rolling update) each call their own.

On a cluster a call goes straight to the node of its first key's slot (all its keys must
share it: a partition's keys do), without redis-py asking the server for the keys of each
``FCALL`` (``COMMAND GETKEYS``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any
from weakref import WeakKeyDictionary

from redis.asyncio import Redis
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import NoScriptError, ResponseError, SlotNotCoveredError
from redis.exceptions import TimeoutError as RedisTimeoutError

from .connection import is_cluster

# Clients of servers without Functions (Redis < 7): their scripts run by EVALSHA.
_EVAL_ONLY: WeakKeyDictionary[Any, bool] = WeakKeyDictionary()


@dataclass(frozen=True)
class Script:
    """One script of a library: its function name and, for EVALSHA, its body and hash."""

    function: str
    body: str
    sha: str
    library: Library


STREAM_GROUPS_LUA = """
-- Stream entry ids as {ms, seq} pairs, which order like the ids, and a stream's consumer
-- groups as XINFO GROUPS gives them (a table of fields each): shared by the scripts that
-- trim streams, move a group's position and hand a group's entries over.
local function parse(id)
  local ms, seq = string.match(id, '^(%d+)-(%d+)$')
  return {tonumber(ms), tonumber(seq)}
end
local function less(a, b) return a[1] < b[1] or (a[1] == b[1] and a[2] < b[2]) end
local function text(id) return string.format('%d-%d', id[1], id[2]) end
local function groups(key)
  local out = {}
  for _, fields in ipairs(redis.call('XINFO', 'GROUPS', key)) do
    local g = {}
    for i = 1, #fields, 2 do g[fields[i]] = fields[i + 1] end
    out[#out + 1] = g
  end
  return out
end
local function group_named(key, name)
  for _, g in ipairs(groups(key)) do
    if g['name'] == name then return g end
  end
  return nil
end
-- The first entry a group has yet to handle: its first pending, or the one past its position.
local function needs(key, group)
  local delivered = parse(group['last-delivered-id'])
  local need = {delivered[1], delivered[2] + 1}
  if tonumber(group['pending']) > 0 then
    local first = parse(redis.call('XPENDING', key, group['name'])[2])
    if less(first, need) then need = first end
  end
  return need
end
"""
"""Lua functions for scripts that read streams' ids and groups: put before a body that
uses them (``STREAM_GROUPS_LUA + body``)."""


class Library:
    """The scripts of one module, by name; each body reads its keys and arguments from
    ``KEYS`` and ``ARGV``, as a script given to EVAL does."""

    def __init__(self, name: str, scripts: Mapping[str, str]) -> None:
        digest = hashlib.sha1(repr(sorted(scripts.items())).encode()).hexdigest()[:12]
        self.name = f"caravel_{name}_{digest}"
        self.scripts = {
            key: Script(
                f"{name}_{key}_{digest}", body, hashlib.sha1(body.encode()).hexdigest(), self
            )
            for key, body in scripts.items()
        }
        functions = [
            f"redis.register_function('{s.function}', function(KEYS, ARGV)\n{s.body}\nend)"
            for s in self.scripts.values()
        ]
        self.code = f"#!lua name={self.name}\n" + "\n".join(functions)

    def __getitem__(self, name: str) -> Script:
        return self.scripts[name]


async def call(redis: Redis, script: Script, keys: Sequence[Any], args: Sequence[Any]) -> Any:
    """Run ``script`` once (one round trip, and a load when the server lacks it)."""
    async with Batch(redis) as batch:
        batch.call(script, keys, args)
        return (await batch.execute())[0]


class Batch:
    """A pipeline (not a transaction) whose script calls survive a server that lacks their
    script: ``batch.pipe`` takes any other command, ``call`` adds a script's."""

    def __init__(self, redis: Redis) -> None:
        self.redis = redis
        self.pipe: Any = redis.pipeline(transaction=False)
        self._calls: dict[int, tuple[Script, list[Any], list[Any]]] = {}
        self._nodes: dict[int, Any] = {}  # a call's position -> its node (None: the one Redis)
        self._waits: dict[Any, int] = {}  # node -> the position of its WAIT
        self._wait: tuple[int, int] | None = None
        self._eval_only = _EVAL_ONLY.get(redis, False)  # looked up once: a weak key costs

    async def __aenter__(self) -> Batch:
        if is_cluster(self.redis) and self.redis._initialize:
            await self.redis.initialize()  # the slot map, to route calls by their keys
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        await self.pipe.reset()

    def call(self, script: Script, keys: Sequence[Any], args: Sequence[Any]) -> int:
        """Add a call; returns its position among the replies."""
        position = len(self.pipe)
        self._calls[position] = (script, list(keys), list(args))
        self._nodes[position] = _send(self.pipe, self.redis, self._eval_only, script, keys, args)
        return position

    def wait(self, replicas: int, timeout_ms: int) -> None:
        """After the calls so far: each node they went to waits (``WAIT``, on the
        connection that wrote) until ``replicas`` of its replicas have them, or
        ``timeout_ms``; :meth:`replicated` tells how many did."""
        self._wait = (replicas, timeout_ms)
        for node in dict.fromkeys(self._nodes.values()):
            self._waits[node] = len(self.pipe)
            _wait(self.pipe, node, replicas, timeout_ms)

    def replicated(self, replies: Sequence[Any], position: int) -> int:
        """How many replicas have the call at ``position`` (after :meth:`wait`)."""
        reply = replies[self._waits[self._nodes[position]]]
        return reply if isinstance(reply, int) else 0

    async def execute(self, raise_on_error: bool = True) -> list[Any]:
        """Every reply, in order; calls that found their script missing are sent again,
        once their library is loaded (so after the batch's other commands: a batch does
        not read what its own calls write). Raises the first error, as a pipeline does,
        unless ``raise_on_error`` is False: the errors are then replies (on a cluster, one
        shard's faults stay with the calls that went to it)."""
        replies = await self._first_send()
        refused: dict[str, Exception] = {}  # master -> why it did not load a library
        for _ in range(2):  # the second time: a server found to lack Functions
            missing = [i for i in self._calls if is_missing(replies[i])]
            if not missing:
                break
            libraries = {self._calls[i][0].library for i in missing}
            refused = await _load(self.redis, libraries, replies)
            self._eval_only = _EVAL_ONLY.get(self.redis, False)
            async with self.redis.pipeline(transaction=False) as again:
                positions = list(missing)
                for i in missing:
                    self._nodes[i] = _send(again, self.redis, self._eval_only, *self._calls[i])
                if self._wait is not None:  # the calls sent again are waited for again
                    for node in dict.fromkeys(self._nodes[i] for i in missing):
                        if node not in self._waits:  # moved to a node not waited for yet
                            self._waits[node] = len(replies)
                            replies.append(None)  # its WAIT's reply, after the batch's
                        positions.append(self._waits[node])
                        _wait(again, node, *self._wait)
                again_replies = await again.execute(raise_on_error=False)
                for i, reply in zip(positions, again_replies, strict=True):
                    replies[i] = reply
        for i in self._calls:  # a master that refused the library: its refusal is the reply
            name = getattr(self._nodes[i], "name", None)
            if name in refused and is_missing(replies[i]):
                replies[i] = refused[name]
        for reply in replies:
            if raise_on_error and isinstance(reply, Exception):
                raise reply
        return replies

    async def _first_send(self) -> list[Any]:
        """The replies of the batch as queued. A lone command on one Redis (the engine's
        append of a batch, most script calls) goes as a plain command: redis-py's pipeline
        adds a task per execution (the connection's release, shielded) and a scan for
        HIMPORT commands, a third of the engine's round-trip overhead. An error reply is a
        reply, as in a pipeline that does not raise."""
        pipe = self.pipe
        if len(pipe) != 1 or self._wait is not None or is_cluster(self.redis):
            replies: list[Any] = await pipe.execute(raise_on_error=False)
            return replies
        args, options = pipe.command_stack[0]
        redis: Any = self.redis  # redis-py's execute_command is untyped
        try:
            return [await redis.execute_command(*args, **options)]
        except ResponseError as error:
            return [error]


def invocation(
    redis: Redis, script: Script, keys: Sequence[Any], args: Sequence[Any]
) -> tuple[Any, ...]:
    """The command that calls ``script`` on one Redis (FCALL, or EVALSHA on a server found
    to lack Functions), for a caller that sends it on a connection of its own; a reply that
    :func:`is_missing` says the script is not there yet (:func:`call` loads it)."""
    if _EVAL_ONLY.get(redis, False):
        return ("EVALSHA", script.sha, len(keys), *keys, *args)
    return ("FCALL", script.function, len(keys), *keys, *args)


def _send(
    pipe: Any,
    redis: Redis,
    eval_only: bool,
    script: Script,
    keys: Sequence[Any],
    args: Sequence[Any],
) -> Any:
    """Queue one call (by EVALSHA if ``eval_only``); returns the cluster node it goes to
    (None: the one Redis)."""
    if eval_only:
        pipe.execute_command("EVALSHA", script.sha, len(keys), *keys, *args)
        return None
    if not is_cluster(redis):
        pipe.execute_command("FCALL", script.function, len(keys), *keys, *args)
        return None
    try:
        node = redis.get_node_from_key(keys[0])
    except SlotNotCoveredError:  # the slot map is being refreshed: redis-py routes the call
        pipe.execute_command("FCALL", script.function, len(keys), *keys, *args)
        return _UNROUTED
    pipe.execute_command("FCALL", script.function, len(keys), *keys, *args, target_nodes=node)
    return node


_UNROUTED = "unrouted"  # a call's node when redis-py chose it: no WAIT can vouch for it


def _wait(pipe: Any, node: Any, replicas: int, timeout_ms: int) -> None:
    if node is _UNROUTED:
        pipe.execute_command("ECHO", "no replica known")
    elif node is None:
        pipe.execute_command("WAIT", replicas, timeout_ms)
    else:
        pipe.execute_command("WAIT", replicas, timeout_ms, target_nodes=node)


def is_missing(reply: Any) -> bool:
    """The reply of a call whose script the server does not have (or whose server does not
    know FCALL at all)."""
    if isinstance(reply, NoScriptError):
        return True
    if not isinstance(reply, ResponseError):
        return False
    return "function not found" in str(reply).lower() or _no_functions(reply)


def _no_functions(reply: Any) -> bool:
    """The reply of an FCALL to a server without Functions (Redis < 7)."""
    text = str(reply).lower()
    return isinstance(reply, ResponseError) and "unknown command" in text and "fcall" in text


async def _load(
    redis: Redis, libraries: set[Library], replies: Sequence[Any]
) -> dict[str, Exception]:
    """Load the libraries on every master; a server without Functions turns the client to
    EVALSHA for good, with the scripts loaded for it. Returns the masters of a cluster that
    refused (by node name), with their error."""
    refused: dict[str, Exception] = {}
    if not _EVAL_ONLY.get(redis) and any(_no_functions(r) for r in replies):
        _EVAL_ONLY[redis] = True
    for library in sorted(libraries, key=lambda lib: lib.name):
        if _EVAL_ONLY.get(redis):
            for script in library.scripts.values():
                await redis.script_load(script.body)
        elif is_cluster(redis):
            refused.update(await _load_on_masters(redis, library))
        else:
            await redis.function_load(library.code, replace=True)
    return refused


async def _load_on_masters(redis: Any, library: Library) -> dict[str, Exception]:
    """Load ``library`` on every master, each alone: a master that refuses (NOREPLICAS,
    short of replicas; away) gives its calls its refusal as their reply, a transient
    error of that shard, while the other masters' calls go on. Loaded on all at once, one
    master's refusal raised out of every batch that needed the library, on every shard."""
    refused: dict[str, Exception] = {}
    for node in redis.get_primaries():
        try:
            await redis.execute_command("FUNCTION LOAD", "REPLACE", library.code, target_nodes=node)
        except (ResponseError, RedisConnectionError, RedisTimeoutError) as e:
            refused[node.name] = e
    return refused
