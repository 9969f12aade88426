"""The game event log on Redis Streams.

One stream per game holds its log, with entry id ``<version>-0`` so Redis itself refuses an
out-of-order version. One Lua script appends a command's events atomically: it checks the
expected version and the command id, adds the events to the game's log (the server-only part
in a field of its own) and, redacted, as one entry per command to the partition's event
stream (``g`` game, ``v`` last version, ``n`` count, ``e`` JSON array), records the command as
seen, stores the sender's result, acknowledges the command stream entry and adds any decision
requests. A stale version is a conflict and writes nothing.

Durability: replication is asynchronous, so an append acknowledged just before its master
fails can vanish with it. With ``replicas`` set, the store asks every master it wrote to
(``WAIT``, on the connection that wrote, in the same round trip) for that many replicas to
hold the appends, and only then stores the senders' results; an append not replicated in
time is in the log but unanswered (its sender times out, and asking again with the same
command id gets the answer once the replicas have it).

A finished game's log moves to the SQL archive (``archive.py``); Redis then keeps only its id,
in the partition's ``archived`` set. Given the archive, :meth:`EventStore.read_many` (and so
``read``, ``load`` and ``load_many``) and :meth:`EventStore.seats` read an archived game
from there, so readers need not know where a game lives; an append that would start a new
game under an archived id is refused.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Generic, Protocol, TypeVar

from pydantic_core import from_json
from redis.asyncio import Redis

from shared.bus.connection import is_cluster
from shared.bus.faults import transient
from shared.bus.keys import Keys
from shared.bus.scripts import Batch, Library, call
from shared.contracts import (
    CommandResult,
    EncodedEvent,
    EventEnvelope,
    Seats,
    command_key,
    dump_json,
    read_event,
)
from shared.redis_replies import text as _text

RESULT_TTL_S = 3600

_APPEND = """
-- Appends of several commands, each as it would be alone, in order: one call per batch
-- (per partition on a cluster, whose keys share a slot), one reply of (status, version)
-- pairs. For each append, KEYS holds 10 keys in turn: 1 log, 2 partition events, 3 meta,
-- 4 seen, 5 partition games, 6 snapshot, 7 result, 8 command stream, 9 decisions,
-- 10 partition archived games. ARGV[1] is the number of appends; then, for each, the count
-- of its arguments and they: 1 expected version, 2 command id, 3 game id, 4 group, 5 entry
-- id, 6 result ttl, 7 result json ('' : the caller publishes it, once replicas have the
-- append), 8 the game's snapshot at the append's version ('' none: stored only with the
-- append, never on a log that took other events), 9 event count, then (public json,
-- secret json or '') pairs, then decision jsons. The log keeps the secret beside the
-- public event; the partition stream gets the public event only. A stale version is a
-- conflict and writes nothing.
local function append(k, a, last)
  local version = tonumber(redis.call('HGET', KEYS[k + 3], 'version') or '0')
  if ARGV[a + 2] ~= '' then
    local seen = redis.call('HGET', KEYS[k + 4], ARGV[a + 2])
    if seen then return 'duplicate', seen end
  end
  if version ~= tonumber(ARGV[a + 1]) then return 'conflict', tostring(version) end
  if version == 0 and redis.call('SISMEMBER', KEYS[k + 10], ARGV[a + 3]) == 1 then
    return 'archived', '0'
  end
  local n = tonumber(ARGV[a + 9])
  local publics = {}
  for i = 0, n - 1 do
    version = version + 1
    local public, secret = ARGV[a + 10 + 2 * i], ARGV[a + 11 + 2 * i]
    if secret == '' then
      redis.call('XADD', KEYS[k + 1], version .. '-0', 'e', public)
    else
      redis.call('XADD', KEYS[k + 1], version .. '-0', 'e', public, 's', secret)
    end
    publics[i + 1] = public
  end
  if n > 0 then
    redis.call('XADD', KEYS[k + 2], '*', 'g', ARGV[a + 3], 'v', version, 'n', n,
               'e', '[' .. table.concat(publics, ',') .. ']')
  end
  redis.call('HSET', KEYS[k + 3], 'version', version)
  if tonumber(ARGV[a + 1]) == 0 then redis.call('SADD', KEYS[k + 5], ARGV[a + 3]) end
  if ARGV[a + 2] ~= '' then redis.call('HSET', KEYS[k + 4], ARGV[a + 2], version) end
  if ARGV[a + 8] ~= '' then redis.call('HSET', KEYS[k + 6], 'v', version, 's', ARGV[a + 8]) end
  if ARGV[a + 7] ~= '' then
    redis.call('RPUSH', KEYS[k + 7], ARGV[a + 7])
    redis.call('EXPIRE', KEYS[k + 7], tonumber(ARGV[a + 6]))
  end
  if ARGV[a + 5] ~= '' then redis.call('XACK', KEYS[k + 8], ARGV[a + 4], ARGV[a + 5]) end
  for i = a + 10 + 2 * n, last do
    redis.call('XADD', KEYS[k + 9], '*', 'r', ARGV[i])
  end
  return 'ok', tostring(version)
end
local out = {}
local a = 2
for j = 0, tonumber(ARGV[1]) - 1 do
  local m = tonumber(ARGV[a])
  out[2 * j + 1], out[2 * j + 2] = append(10 * j, a, a + m)
  a = a + m + 1
end
return out
"""

_FINISH = """
-- A command that appends nothing (rejected, duplicate): store the result, record a
-- rejection, acknowledge; nothing if the game's log is behind the version the outcome was
-- decided at (a failover took its tail back: 0, the engine reloads the game). An archived
-- game's log is in SQL, not here: not checked.
-- KEYS: 1 result, 2 command stream, 3 rejections, 4 meta, 5 partition archived games
-- ARGV: 1 result json ('' none), 2 ttl, 3 group, 4 entry id ('' none), 5 rejection json ('' none),
--       6 the version decided at ('' none), 7 game id
if ARGV[6] ~= '' and redis.call('SISMEMBER', KEYS[5], ARGV[7]) == 0 then
  if tonumber(redis.call('HGET', KEYS[4], 'version') or '0') < tonumber(ARGV[6]) then return 0 end
end
if ARGV[1] ~= '' then
  redis.call('RPUSH', KEYS[1], ARGV[1])
  redis.call('EXPIRE', KEYS[1], tonumber(ARGV[2]))
end
if ARGV[5] ~= '' then redis.call('XADD', KEYS[3], '*', 'r', ARGV[5]) end
if ARGV[4] ~= '' then redis.call('XACK', KEYS[2], ARGV[3], ARGV[4]) end
return 1
"""

_FINISHED = """
-- A game is over: its final hash ('' keeps the one recorded), when it finished (Redis time,
-- ms) and the partition event stream's last entry then, at or after the game's last one.
-- The first time and entry recorded stay. Nothing is recorded if the log has not reached
-- the version of the end (a failover took it back after the engine saw it: the game goes
-- on). KEYS: 1 meta, 2 finished, 3 partition events. ARGV: 1 game id, 2 final hash, 3 the
-- version of the end (0: not checked)
if tonumber(redis.call('HGET', KEYS[1], 'version') or '0') < tonumber(ARGV[3]) then
  return 0
end
local now = redis.call('TIME')
local ms = string.format('%d', tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000))
local last = redis.call('XREVRANGE', KEYS[3], '+', '-', 'COUNT', 1)
local entry = '0-0'
if #last > 0 then entry = last[1][1] end
if ARGV[2] ~= '' then redis.call('HSET', KEYS[1], 'final_hash', ARGV[2]) end
redis.call('HSETNX', KEYS[1], 'finished_ms', ms)
redis.call('HSETNX', KEYS[1], 'final_entry', entry)
redis.call('SADD', KEYS[2], ARGV[1])
return 1
"""

_FORGET = """
-- Delete an archived game's keys, if it is still the game that was archived (same version
-- and final hash); its id moves from the partition's games to its archived games.
-- KEYS: 1 meta, 2 log, 3 seen, 4 snapshot, 5 seats, 6 view, 7 games, 8 finished, 9 archived
-- ARGV: 1 game id, 2 version, 3 final hash
if redis.call('HGET', KEYS[1], 'version') ~= ARGV[2]
   or redis.call('HGET', KEYS[1], 'final_hash') ~= ARGV[3] then
  return 0
end
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6])
redis.call('SREM', KEYS[7], ARGV[1])
redis.call('SREM', KEYS[8], ARGV[1])
redis.call('SADD', KEYS[9], ARGV[1])
return 1
"""


_SNAPSHOT = """
-- Store a snapshot at version ARGV[1] only if the log has reached it. The engine snapshots
-- after an append; if a failover took the append back meanwhile, the snapshot would reach
-- the new master and be loaded in place of its log (a state the log no longer has).
-- KEYS: 1 snapshot, 2 meta. ARGV: 1 version, 2 state json
if tonumber(redis.call('HGET', KEYS[2], 'version') or '0') < tonumber(ARGV[1]) then
  return 0
end
redis.call('HSET', KEYS[1], 'v', ARGV[1], 's', ARGV[2])
return 1
"""


SCRIPTS = Library(
    "eventstore",
    {
        "append": _APPEND,
        "finish": _FINISH,
        "finished": _FINISHED,
        "forget": _FORGET,
        "snapshot": _SNAPSHOT,
    },
)


@lru_cache(maxsize=65_536)
def _append_keys(keys: Keys, game_id: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The keys an append to ``game_id`` writes, in the script's order, before and after its
    result's (the command's own). Formatted once per game, not once per command (nine names,
    each with the game's partition hashed)."""
    k, p = keys, keys.partition(game_id)
    tail = (k.commands(p), k.decisions(p), k.archived(p))
    head = (k.log(game_id), k.events(p), k.meta(game_id), k.seen(game_id), k.games(p))
    return (*head, k.snapshot(game_id)), tail


class ArchiveReader(Protocol):
    """What the event store reads from the archive of finished games (``archive.Archive``);
    its methods block (SQL), so the store calls them in a thread."""

    def logs(self, game_ids: Sequence[str]) -> dict[str, list[EventEnvelope]]: ...

    def seats(self, game_ids: Sequence[str]) -> dict[str, dict[str, str]]: ...

    def has(self, game_id: str) -> bool: ...


@dataclass
class Append:
    """One command's events to append at ``expected`` version, with what goes with them."""

    game_id: str
    expected: int
    events: Sequence[EncodedEvent]
    command_id: str = ""
    entry: tuple[int, str] | None = None  # (partition, command stream entry id) to acknowledge
    decisions: Sequence[str] = ()  # decision request JSON documents
    seat: int | None = None  # the command's seat: its id is scoped to it (``command_key``)
    snapshot: str = ""  # the game's state JSON at ``version``, stored if the append is made

    @property
    def version(self) -> int:
        return self.expected + len(self.events)


@dataclass(frozen=True)
class AppendResult:
    # "ok", "duplicate", "conflict", "archived" (the id is an archived game's), or "failed":
    # its shard refused it for now (``shared.bus.faults``), nothing written: try again later
    status: str
    version: int
    answered: bool = True  # False: appended, but not on enough replicas to tell the sender
    error: Exception | None = None  # why it "failed"


def _result(a: Append, reply: Any, j: int) -> AppendResult:
    """The ``j``-th append's result from its script call's reply. A transient error is the
    call's appends' alone (a cluster's other shards took theirs); any other is raised."""
    if isinstance(reply, Exception):
        if not transient(reply):
            raise reply
        return AppendResult("failed", a.expected, error=reply)
    return AppendResult(_text(reply[2 * j]), int(reply[2 * j + 1]))


@dataclass(frozen=True)
class FinishedLog:
    """A finished game as Redis holds it: what the archive keeps of it."""

    game_id: str
    events: list[EventEnvelope]
    final_hash: str
    seats: dict[str, str]

    @property
    def version(self) -> int:
        return self.events[-1].version if self.events else 0


@dataclass(frozen=True)
class Finished:
    """A game in a partition's finished set: when it finished (Redis time, ms) and the
    partition event stream's last entry then (None for both if not recorded)."""

    game_id: str
    finished_ms: int | None
    final_entry: str | None


S = TypeVar("S")


class Codec(Protocol[S]):
    """How a game's state is built from its log: the event store stays game-agnostic."""

    def initial(self, first: EventEnvelope) -> S: ...

    def apply(self, state: S, event: EventEnvelope) -> None: ...

    def snapshot(self, state: S) -> dict[str, Any]: ...

    def restore(self, snapshot: dict[str, Any]) -> S: ...


@dataclass
class Loaded(Generic[S]):
    state: S | None
    version: int
    seen: dict[str, int] = field(default_factory=dict)
    event_id: str | None = None  # the last event applied (None: the snapshot is the tip)


@dataclass(frozen=True)
class Held:
    """What a consumer holds of a game's log: the version it applied last and that event's
    id. A failover can roll a log back (the new master lacked the tail the old one
    acknowledged) and the engine then writes other events at the same versions: the version
    alone does not tell the two logs apart, the event id does."""

    version: int
    event_id: str | None

    def range(self, upto: int | None = None) -> tuple[int, int | None]:
        """The ``read_many`` range from the held event (included, to check it) up to
        ``upto`` (None: the end; never below the held event)."""
        return (max(self.version - 1, 0), None if upto is None else max(upto, self.version))

    def rolled_back(self, events: Sequence[EventEnvelope]) -> bool:
        """``events``, read by :meth:`range`, no longer start with the event held: the log
        went back (shorter than the version held, or another event at it). A consumer then
        rebuilds the game from the log instead of diverging from it."""
        if self.version == 0:
            return False
        if not events or events[0].version != self.version:
            return True
        return self.event_id is not None and events[0].event_id != self.event_id


class EventStore:
    """Append, read and snapshot game logs. Every method is one round trip or a pipeline
    (reading an archived game takes one more, and a query of the archive)."""

    def __init__(
        self,
        redis: Redis,
        keys: Keys,
        group: str = "engine",
        archive: ArchiveReader | None = None,
        replicas: int = 0,
        replica_timeout_ms: int = 1000,
    ) -> None:
        self.redis = redis
        self.keys = keys
        self.group = group
        self.archive = archive
        self.replicas = replicas
        self.replica_timeout_ms = replica_timeout_ms

    # --- writing -------------------------------------------------------------------------

    def _call_args(self, appends: Sequence[Append]) -> tuple[list[str], list[Any]]:
        """The keys and arguments of one script call appending ``appends`` (see the script)."""
        keys: list[str] = []
        args: list[Any] = [len(appends)]
        for a in appends:
            head, tail = _append_keys(self.keys, a.game_id)
            keys += head
            keys.append(self.keys.result(a.game_id, a.seat, a.command_id or "-"))
            keys += tail
            at = len(args)
            args += (
                0,  # its argument count, set below
                a.expected,
                command_key(a.seat, a.command_id) if a.command_id else "",
                a.game_id,
                self.group,
                a.entry[1] if a.entry else "",
                RESULT_TTL_S,
                self._result_json(a) if a.command_id and not self.replicas else "",
                a.snapshot,
                len(a.events),
            )
            for public, secret in a.events:
                args += (public, secret)
            args += a.decisions
            args[at] = len(args) - at - 1
        return keys, args

    @staticmethod
    def _result_json(a: Append) -> str:
        """A :class:`CommandResult` "accepted" as its JSON, written without building the
        model (once per command the engine appends)."""
        return dump_json(
            {
                "command_id": a.command_id,
                "game_id": a.game_id,
                "status": "accepted",
                "seat": a.seat,
                "version": a.version,
                "code": None,
                "reason": None,
            }
        )

    async def append(self, a: Append) -> AppendResult:
        """Append one command's events atomically (see the module docstring); a transient
        failure is raised, as any other."""
        result = (await self.append_many([a]))[0]
        if result.error is not None:
            raise result.error
        return result

    async def append_many(self, appends: Sequence[Append]) -> list[AppendResult]:
        """Appends executed in order, in one script call per partition on a cluster (their
        keys share its slot) and one in all on one Redis: one round trip for a whole batch,
        with one reply to parse instead of one per command."""
        if not appends:
            return []
        groups = self._groups(appends)
        async with Batch(self.redis) as batch:
            calls = [
                batch.call(SCRIPTS["append"], *self._call_args([appends[i] for i in g]))
                for g in groups
            ]
            if self.replicas:
                batch.wait(self.replicas, self.replica_timeout_ms)
            raw = await batch.execute(raise_on_error=False)
            by_append: dict[int, tuple[AppendResult, int]] = {}
            for group, position in zip(groups, calls, strict=True):
                reply = raw[position]
                for j, i in enumerate(group):
                    by_append[i] = (_result(appends[i], reply, j), position)
            results = [by_append[i][0] for i in range(len(appends))]
            if not self.replicas:
                return results
            replicated = [
                batch.replicated(raw, by_append[i][1]) >= self.replicas for i in range(len(appends))
            ]
        await self._answer(
            [
                a
                for a, r, ok in zip(appends, results, replicated, strict=True)
                if ok and r.status == "ok"
            ]
        )
        return [
            r if ok or r.status != "ok" else AppendResult(r.status, r.version, answered=False)
            for r, ok in zip(results, replicated, strict=True)
        ]

    def _groups(self, appends: Sequence[Append]) -> list[list[int]]:
        """The appends' positions by script call: all in one on one Redis, by partition on
        a cluster (a call's keys must share a slot); each group in the batch's order."""
        if not is_cluster(self.redis):
            return [list(range(len(appends)))]
        by_partition: dict[int, list[int]] = {}
        for i, a in enumerate(appends):
            by_partition.setdefault(self.keys.partition(a.game_id), []).append(i)
        return list(by_partition.values())

    async def _answer(self, appends: Sequence[Append]) -> None:
        """Store the senders' results of replicated appends (one round trip)."""
        answered = [a for a in appends if a.command_id]
        if not answered:
            return
        async with self.redis.pipeline(transaction=False) as pipe:
            for a in answered:
                key = self.keys.result(a.game_id, a.seat, a.command_id)
                pipe.rpush(key, self._result_json(a))
                pipe.expire(key, RESULT_TTL_S)
            await pipe.execute()

    async def finish(
        self,
        game_id: str | None,
        partition: int,
        result: CommandResult | None,
        entry_id: str | None,
        rejection: str | None = None,
        version: int | None = None,
    ) -> bool:
        """Record the outcome of a command that appended nothing, and acknowledge it; False
        (nothing done) if the game's log is behind ``version``, the one it was decided at."""
        k = self.keys
        # Without a result to store, any key of the partition's slot stands in for it.
        result_key, result_json = k.rejections(partition), ""
        if result is not None and game_id is not None:
            result_key = k.result(game_id, result.seat, result.command_id)
            result_json = result.model_dump_json()
        meta, decided_at = k.rejections(partition), ""  # a key of the slot: nothing checked
        if version is not None and game_id is not None:  # a game of the partition was read
            meta, decided_at = k.meta(game_id), str(version)
        keys = [result_key, k.commands(partition), k.rejections(partition), meta]
        keys.append(k.archived(partition))
        args: list[Any] = [
            result_json,
            RESULT_TTL_S,
            self.group,
            entry_id or "",
            rejection or "",
            decided_at,
            game_id or "",
        ]
        return bool(await call(self.redis, SCRIPTS["finish"], keys, args))

    async def save_snapshots(self, snapshots: Sequence[tuple[str, int, dict[str, Any]]]) -> None:
        """Store (game, version, state) snapshots in one round trip; each only if its game's
        log has reached its version (see the script: a log that went back keeps none)."""
        async with Batch(self.redis) as batch:
            for game_id, version, snapshot in snapshots:
                data = dump_json(snapshot)
                keys = [self.keys.snapshot(game_id), self.keys.meta(game_id)]
                batch.call(SCRIPTS["snapshot"], keys, [version, data])
            await batch.execute()

    async def record_final_hash(self, game_id: str, state_hash: str, version: int) -> None:
        """The hash of a finished game's final state at ``version``, to check replays
        against; the game joins its partition's finished games, with when it finished (for
        archiving). Nothing is recorded if the log has not reached ``version`` (it went
        back: the game is not over)."""
        await self._record_finished(game_id, state_hash, version)

    async def stamp_finished(self, game_ids: Sequence[str]) -> None:
        """Record when finished games finished, for those that have no such record (they
        finished before it was kept): archiving counts its grace period from now."""
        for game_id in game_ids:
            await self._record_finished(game_id, "", 0)

    async def _record_finished(self, game_id: str, state_hash: str, version: int) -> None:
        k = self.keys
        p = k.partition(game_id)
        keys = [k.meta(game_id), k.finished(p), k.events(p)]
        await call(self.redis, SCRIPTS["finished"], keys, [game_id, state_hash, version])

    async def forget(self, game_id: str, version: int, final_hash: str) -> bool:
        """Delete an archived game from Redis (its log, meta, seen ids, snapshot, seats and
        views), unless it has changed since it was read for the archive; its id moves to the
        partition's archived games. Only once the archive is written and verified."""
        k = self.keys
        p = k.partition(game_id)
        keys = [
            k.meta(game_id),
            k.log(game_id),
            k.seen(game_id),
            k.snapshot(game_id),
            k.seats(game_id),
            k.view(game_id),
            k.games(p),
            k.finished(p),
            k.archived(p),
        ]
        return bool(await call(self.redis, SCRIPTS["forget"], keys, [game_id, version, final_hash]))

    # --- reading -------------------------------------------------------------------------

    async def version(self, game_id: str) -> int:
        raw = await self.redis.hget(self.keys.meta(game_id), "version")
        return int(raw) if raw else 0

    async def read(self, game_id: str, after: int = 0) -> list[EventEnvelope]:
        """The game's events with a version above ``after``, in order (with secrets)."""
        return (await self.read_many({game_id: (after, None)}))[game_id]

    async def read_many(
        self, ranges: Mapping[str, tuple[int, int | None]]
    ) -> dict[str, list[EventEnvelope]]:
        """Several games' events with versions in ``(after, upto]`` (``upto`` None: to the
        end), in one pipelined round trip, so that no reader runs XRANGE on a log itself.
        Archived games' events come from the archive (one more round trip, and a query, only
        when some range is empty)."""
        async with self.redis.pipeline(transaction=False) as pipe:
            for game_id, (after, upto) in ranges.items():
                top = "+" if upto is None else f"{upto}-0"
                pipe.xrange(self.keys.log(game_id), min=f"{after + 1}-0", max=top)
            logs: list[Any] = await pipe.execute()
        out = {game_id: _events(entries) for game_id, entries in zip(ranges, logs, strict=True)}
        archived = await self.archived([g for g, events in out.items() if not events])
        if archived and self.archive is not None:
            found = await asyncio.to_thread(self.archive.logs, archived)
            for game_id in archived:
                after, upto = ranges[game_id]
                out[game_id] = [
                    e
                    for e in found.get(game_id, [])
                    if e.version > after and (upto is None or e.version <= upto)
                ]
        return out

    async def last_event(self, game_id: str) -> EventEnvelope | None:
        """The game's newest event (None: there is no such game), archived games' too."""
        tail: Any = await self.redis.xrevrange(self.keys.log(game_id), count=1)
        if tail:
            return _events(tail)[0]
        archived = await self.read(game_id) if await self.archived([game_id]) else []
        return archived[-1] if archived else None

    async def over(self, game_ids: Sequence[str]) -> list[str]:
        """Those of ``game_ids`` that are over: in their partition's finished games, or
        archived (only finished games are)."""
        k = self.keys
        async with self.redis.pipeline(transaction=False) as pipe:
            for game_id in game_ids:
                pipe.sismember(k.finished(k.partition(game_id)), game_id)
                pipe.sismember(k.archived(k.partition(game_id)), game_id)
            found: list[Any] = await pipe.execute()
        pairs = zip(game_ids, found[0::2], found[1::2], strict=True)
        return [game_id for game_id, finished, archived in pairs if finished or archived]

    async def archived(self, game_ids: Sequence[str]) -> list[str]:
        """Those of ``game_ids`` whose log is in the archive (none without an archive)."""
        if not game_ids or self.archive is None:
            return []
        async with self.redis.pipeline(transaction=False) as pipe:
            for game_id in game_ids:
                pipe.sismember(self.keys.archived(self.keys.partition(game_id)), game_id)
            found: list[Any] = await pipe.execute()
        return [g for g, yes in zip(game_ids, found, strict=True) if yes]

    async def seats(self, game_ids: Sequence[str]) -> dict[str, Seats]:
        """Who played each seat of the games (the lobby's seats hash), archived ones too."""
        if not game_ids:
            return {}
        async with self.redis.pipeline(transaction=False) as pipe:
            for game_id in game_ids:
                pipe.hgetall(self.keys.seats(game_id))
            found: list[Any] = await pipe.execute()
        raw: dict[str, Mapping[Any, Any]] = dict(zip(game_ids, found, strict=True))
        archived = await self.archived([g for g, seats in raw.items() if not seats])
        if archived and self.archive is not None:
            raw.update(await asyncio.to_thread(self.archive.seats, archived))
        return {game_id: Seats.from_hash(seats) for game_id, seats in raw.items()}

    async def exists(self, game_id: str) -> bool:
        """A game of that id is in Redis or in the archive."""
        k = self.keys
        p = k.partition(game_id)
        async with self.redis.pipeline(transaction=False) as pipe:
            pipe.exists(k.meta(game_id), k.log(game_id))
            pipe.sismember(k.games(p), game_id)
            pipe.sismember(k.archived(p), game_id)
            found: list[Any] = await pipe.execute()
        if any(found):
            return True
        return self.archive is not None and await asyncio.to_thread(self.archive.has, game_id)

    async def finished_games(self, partition: int) -> list[Finished]:
        """The partition's finished games still in Redis, with when they finished."""
        members = sorted(_text(g) for g in await self.redis.smembers(self.keys.finished(partition)))
        async with self.redis.pipeline(transaction=False) as pipe:
            for game_id in members:
                pipe.hmget(self.keys.meta(game_id), ["finished_ms", "final_entry"])
            found: list[Any] = await pipe.execute()
        return [
            Finished(g, None if ms is None else int(ms), None if entry is None else _text(entry))
            for g, (ms, entry) in zip(members, found, strict=True)
        ]

    async def finished_log(self, game_id: str) -> FinishedLog | None:
        """A finished game's whole log, final hash and seats, read from Redis in one round
        trip; None if Redis holds no finished game of that id (or not a whole log of it)."""
        async with self.redis.pipeline(transaction=False) as pipe:
            pipe.hgetall(self.keys.meta(game_id))
            pipe.xrange(self.keys.log(game_id))
            pipe.hgetall(self.keys.seats(game_id))
            meta, entries, seats = await pipe.execute()
        if b"final_hash" not in meta:
            return None
        events = _events(entries)
        if not events or events[-1].version != int(meta.get(b"version", 0)):
            return None
        return FinishedLog(
            game_id,
            events,
            _text(meta[b"final_hash"]),
            {_text(k): _text(v) for k, v in seats.items()},
        )

    async def final_hash(self, game_id: str) -> str | None:
        raw = await self.redis.hget(self.keys.meta(game_id), "final_hash")
        return None if raw is None else _text(raw)

    async def seen(self, game_id: str) -> dict[str, int]:
        raw = await self.redis.hgetall(self.keys.seen(game_id))
        return {_text(k): int(v) for k, v in raw.items()}

    async def load(self, game_id: str, codec: Codec[S]) -> Loaded[S]:
        """Snapshot plus the events after it; ``state`` is None for a game with no log."""
        return (await self.load_many([game_id], codec))[game_id]

    async def load_many(self, game_ids: Sequence[str], codec: Codec[S]) -> dict[str, Loaded[S]]:
        """Load several games in two round trips (snapshots and seen ids, then the logs)."""
        k = self.keys
        async with self.redis.pipeline(transaction=False) as pipe:
            for game_id in game_ids:
                pipe.hgetall(k.snapshot(game_id))
                pipe.hgetall(k.seen(game_id))
            first: list[Any] = await pipe.execute()
        snaps, seens = first[0::2], first[1::2]
        starts = [int(snap[b"v"]) if snap else 0 for snap in snaps]
        logs = await self.read_many(
            {game_id: (start, None) for game_id, start in zip(game_ids, starts, strict=True)}
        )
        out: dict[str, Loaded[S]] = {}
        for game_id, snap, seen, version in zip(game_ids, snaps, seens, starts, strict=True):
            state = codec.restore(from_json(snap[b"s"])) if snap else None
            event_id = None
            for event in logs[game_id]:
                if event.version != version + 1:
                    raise ValueError(f"{game_id}: log jumps from {version} to {event.version}")
                if state is None:
                    state = codec.initial(event)
                codec.apply(state, event)
                version, event_id = event.version, event.event_id
            seen_ids = {_text(c): int(v) for c, v in seen.items()}
            out[game_id] = Loaded(state, version, seen_ids, event_id)
        return out

    async def game_ids(self, partition: int) -> list[str]:
        return sorted(_text(g) for g in await self.redis.smembers(self.keys.games(partition)))


def _events(entries: Any) -> list[EventEnvelope]:
    """Log entries to envelopes: the public event with its server-only part put back."""
    return [read_event(fields[b"e"], fields.get(b"s")) for _, fields in entries]
