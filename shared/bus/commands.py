"""Sending commands to the engine: published through FastStream onto the game's partition
command stream (the command's JSON in the entry's body field, ``BODY``)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from redis.asyncio import Redis
from redis.exceptions import ResponseError

from shared.contracts import CommandEnvelope, CommandResult
from shared.redis_replies import text

from . import admission
from .connection import is_cluster
from .consumer import Broker
from .faststream_ext import BODY
from .keys import Keys
from .scripts import Batch, Library, call, invocation, is_missing

WAIT_SLICE_S = 1.0  # well under any socket timeout a client is given

# KEYS: 1 the game's meta, 2 its partition's command stream. ARGV: 1 the version the command
# was decided at, 2 its body. The command is appended as a broker publishes it (its body in
# the BODY field) only while the game's log is at that version; the reply is the log's
# version (0: no log here).
_SEND_AT = f"""
local version = tonumber(redis.call('HGET', KEYS[1], 'version') or '0')
if version == tonumber(ARGV[1]) then
  redis.call('XADD', KEYS[2], '*', '{BODY.decode()}', ARGV[2])
end
return version
"""
SCRIPTS = Library("commands", {"send_at": _SEND_AT})


class CommandSender:
    """Puts commands on partition command streams and reads their results."""

    def __init__(self, redis: Redis, keys: Keys, broker: Broker | None = None) -> None:
        self.redis = redis
        self.keys = keys
        self.broker = broker or Broker(redis)

    async def send(self, command: CommandEnvelope) -> str:
        """Queue ``command``; returns the stream entry id. The engine answers asynchronously."""
        body = command.model_dump_json().encode()
        return await self.send_raw(command.game_id, body, command.command_id)

    async def send_at(self, command: CommandEnvelope, version: int) -> int:
        """Queue ``command``, decided at the game's ``version``, only if the game's log is
        still there: returns the log's version (the command was sent if it is ``version``).
        A bot that decided from its request's own view reads no view, hence no version:
        this keeps a stale request's answer (the game moved on) out of the game, in the
        round trip that sends it. With tracing on (a publication's span is FastStream's)
        the version is read first, then the command published."""
        (at,) = await self.send_many_at([(command, version)])
        if isinstance(at, Exception):
            raise at
        return at

    async def send_many_at(
        self, decided: Sequence[tuple[CommandEnvelope, int]]
    ) -> list[int | Exception]:
        """:meth:`send_at` for each (command, version) of ``decided``, in one round trip
        (a pipeline of script calls; on a cluster, one per shard): the bot player sends
        the answers to a batch of requests together, not one round trip each (issue 24:
        a tenth of the services' CPU at a human pace, most of it the socket write). Each
        reply is the log's version, or the error of that call (a shard away fails its
        own calls only)."""
        if self.broker.traced:
            return [await self._send_at_traced(c, v) for c, v in decided]
        started = time.monotonic()
        streams = []
        async with Batch(self.redis) as batch:
            for command, version in decided:
                stream = self.keys.commands(self.keys.partition(command.game_id))
                meta = self.keys.meta(command.game_id)
                streams.append(stream)
                body = command.model_dump_json().encode()
                batch.call(SCRIPTS["send_at"], [meta, stream], [version, body])
            replies = await batch.execute(raise_on_error=False)
        took = time.monotonic() - started
        out: list[int | Exception] = []
        for (_, version), stream, reply in zip(decided, streams, replies, strict=True):
            if isinstance(reply, Exception):
                out.append(reply)
                continue
            out.append(int(reply))
            if int(reply) == version:
                self.broker.published_outside(stream, took)
        return out

    async def _send_at_traced(self, command: CommandEnvelope, version: int) -> int:
        """:meth:`send_at` with tracing on: the version read first, then the command
        published (a publication's span is FastStream's)."""
        stream = self.keys.commands(self.keys.partition(command.game_id))
        at = int(await self.redis.hget(self.keys.meta(command.game_id), "version") or 0)
        if at == version:
            body = command.model_dump_json().encode()
            await self.broker.publish(body, stream=stream, correlation_id=command.command_id)
        return at

    async def send_raw(
        self, game_id: str, payload: bytes | str, correlation_id: str | None = None
    ) -> str:
        """Queue anything at all on a game's partition stream (the engine must survive it)."""
        stream = self.keys.commands(self.keys.partition(game_id))
        body = payload.encode() if isinstance(payload, str) else payload
        entry: Any = await self.broker.publish(body, stream=stream, correlation_id=correlation_id)
        return text(entry)

    async def send_many(self, commands: Sequence[CommandEnvelope]) -> list[str]:
        """Queue ``commands`` in one transaction: they reach their streams together, in
        order, with no other writer's command between them (a script replaying a game while
        a bot plays one of its seats cannot be overtaken). Returns the entry ids."""
        async with self.redis.pipeline(transaction=True) as pipe:
            for command in commands:
                stream = self.keys.commands(self.keys.partition(command.game_id))
                body = command.model_dump_json().encode()
                await self.broker.publish_in(pipe, body, stream, command.command_id)
            entries: list[Any] = await pipe.execute()
        return [text(e) for e in entries]

    async def result(
        self, game_id: str, command_id: str, timeout_s: float = 0, *, seat: int | None
    ) -> CommandResult | None:
        """The engine's answer to ``seat``'s command, waiting up to ``timeout_s`` (0: no
        wait). Reading does not consume it: a sender may ask again."""
        key = self.keys.result(game_id, seat, command_id)
        raw: Any = await self.redis.lindex(key, 0) if timeout_s <= 0 else None
        deadline = time.monotonic() + timeout_s
        while raw is None and (left := deadline - time.monotonic()) > 0:
            raw = await self.redis.blmove(key, key, _slice(left), "LEFT", "LEFT")  # type: ignore[arg-type]
        return None if raw is None else CommandResult.model_validate_json(raw)

    @property
    def one_trip(self) -> bool:
        """Whether :meth:`execute_admitted` may be used: on one Redis (on a cluster a
        client's bucket is on another shard than its game), and with no tracing (a
        publication's span is FastStream's)."""
        return not is_cluster(self.redis) and not self.broker.traced

    async def execute_admitted(
        self,
        take: admission.Call,
        seat: admission.Call,
        command: CommandEnvelope,
        timeout_s: float = 5,
        then: Sequence[tuple[Any, ...]] = (),
    ) -> tuple[list[Any], CommandResult | None, list[Any]]:
        """Admit ``command`` (the ``take`` and ``seat`` calls of :mod:`.admission`) and,
        when admitted, send it and wait for its answer: the ``admit`` script and the first
        wait go on one connection in one write, one round trip when the engine answers
        within a slice. Returns the script's reply (``[b"sent", b"0"]``: sent), the
        answer (None: not sent) and the replies of the commands ``then`` (read-only ones,
        sent after the wait on its connection: Redis runs them once the wait is answered,
        so they read what the engine wrote with its answer; [] when the first wait was not
        answered, or the command not sent); raises TimeoutError when no answer comes in
        time. A command not sent leaves its wait blocking on the connection: the
        connection is closed, not given back to the pool. Only when :attr:`one_trip`."""
        started = time.monotonic()
        stream = self.keys.commands(self.keys.partition(command.game_id))
        key = self.keys.result(command.game_id, command.seat, command.command_id)
        script = admission.admit(take, seat, stream, command.model_dump_json().encode())
        wait = ("BLMOVE", key, key, "LEFT", "LEFT", _slice(timeout_s))
        pool: Any = self.redis.connection_pool
        connection = await pool.get_connection()
        try:
            reply, raw, after = await _admitted(
                connection, invocation(self.redis, *script), wait, then
            )
        finally:
            await pool.release(connection)
        if isinstance(reply, ResponseError):  # the library is not loaded yet: load, call
            reply = await call(self.redis, *script)
        if reply[0] != admission.SENT:
            return reply, None, []
        self.broker.published_outside(stream, time.monotonic() - started)
        return reply, await self._answer(command, raw, started, timeout_s), after

    async def execute(self, command: CommandEnvelope, timeout_s: float = 5) -> CommandResult:
        """Send and wait for the answer; raises TimeoutError when none comes in time. The
        command and the first wait for its answer go in one pipeline: one round trip when
        the engine answers within a slice (the wait holds a connection either way)."""
        started = time.monotonic()
        stream = self.keys.commands(self.keys.partition(command.game_id))
        key = self.keys.result(command.game_id, command.seat, command.command_id)
        async with self.redis.pipeline(transaction=False) as pipe:
            body = command.model_dump_json().encode()
            await self.broker.publish_in(pipe, body, stream, command.command_id)
            pipe.blmove(key, key, _slice(timeout_s), "LEFT", "LEFT")  # type: ignore[arg-type]
            raw: Any = (await pipe.execute())[-1]
        return await self._answer(command, raw, started, timeout_s)

    async def _answer(
        self, command: CommandEnvelope, raw: Any, started: float, timeout_s: float
    ) -> CommandResult:
        """The answer the first wait read (``raw``), else the one a later slice reads by
        ``timeout_s`` after ``started``; TimeoutError when none comes."""
        if raw is not None:
            return CommandResult.model_validate_json(raw)
        left = started + timeout_s - time.monotonic()
        result = await self.result(command.game_id, command.command_id, left, seat=command.seat)
        if result is None:
            raise TimeoutError(f"no answer to command {command.command_id} in {timeout_s}s")
        return result


def _slice(left_s: float) -> float:
    """How long one blocking read waits: in slices, since a read longer than the client's
    socket timeout (redis-py: 5 s) fails with redis' TimeoutError instead of returning None;
    at least 10 ms, since Redis takes a timeout that rounds to 0 ms as "block for ever"."""
    return max(min(left_s, WAIT_SLICE_S), 0.01)


async def _admitted(
    connection: Any,
    script: tuple[Any, ...],
    wait: tuple[Any, ...],
    then: Sequence[tuple[Any, ...]] = (),
) -> tuple[Any, Any, list[Any]]:
    """Send ``script``, ``wait`` and ``then`` in one write; their replies: the script's,
    the wait's (None when the script did not send: then, or on any failure, the
    connection is closed, as a wait is still blocking on it, or a reply unread), and
    ``then``'s ([] unless the wait was answered: before, they read too early; an error
    reply is its error). A script missing from the server is its ResponseError, for the
    caller to load. The replies are read by the connection's ``replies``
    (:mod:`.connection`), without redis-py's timer and fault handling per reply."""
    try:
        await connection.send_packed_command(connection.pack_commands([script, wait, *then]))
        (reply,) = await connection.replies(1)
        if isinstance(reply, ResponseError) and not is_missing(reply):
            raise reply
        if isinstance(reply, ResponseError) or reply[0] != admission.SENT:
            await connection.disconnect()
            return reply, None, []
        raw, *after = await connection.replies(1 + len(then))
        if isinstance(raw, ResponseError):
            raise raw
        return reply, raw, after if raw is not None else []
    except BaseException:
        await connection.disconnect()
        raise
