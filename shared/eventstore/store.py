"""The game event log on Redis Streams.

One stream per game holds its log, with entry id ``<version>-0`` so Redis itself refuses an
out-of-order version. One Lua script appends a command's events atomically: it checks the
expected version and the command id, adds the events to the game's log (the server-only part
in a field of its own) and, redacted, as one entry per command to the partition's event
stream (``g`` game, ``v`` last version, ``n`` count, ``e`` JSON array), records the command as
seen, stores the sender's result, acknowledges the command stream entry and adds any decision
requests. A stale version is a conflict and writes nothing.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

from redis.asyncio import Redis

from shared.bus.keys import Keys
from shared.contracts import CommandResult, EncodedEvent, EventEnvelope, load_event

RESULT_TTL_S = 3600

_APPEND = """
-- KEYS: 1 log, 2 partition events, 3 meta, 4 seen, 5 partition games, 6 result,
--       7 command stream, 8 decisions
-- ARGV: 1 expected version, 2 command id, 3 game id, 4 group, 5 entry id, 6 result ttl,
--       7 result json, 8 event count, then (public json, secret json or '') pairs, then
--       decision jsons. The log keeps the secret beside the public event; the partition
--       stream gets the public event only.
local version = tonumber(redis.call('HGET', KEYS[3], 'version') or '0')
if ARGV[2] ~= '' then
  local seen = redis.call('HGET', KEYS[4], ARGV[2])
  if seen then return {'duplicate', seen} end
end
if version ~= tonumber(ARGV[1]) then return {'conflict', tostring(version)} end
local n = tonumber(ARGV[8])
local publics = {}
for i = 0, n - 1 do
  version = version + 1
  local public, secret = ARGV[9 + 2 * i], ARGV[10 + 2 * i]
  if secret == '' then
    redis.call('XADD', KEYS[1], version .. '-0', 'e', public)
  else
    redis.call('XADD', KEYS[1], version .. '-0', 'e', public, 's', secret)
  end
  publics[i + 1] = public
end
if n > 0 then
  redis.call('XADD', KEYS[2], '*', 'g', ARGV[3], 'v', version, 'n', n,
             'e', '[' .. table.concat(publics, ',') .. ']')
end
redis.call('HSET', KEYS[3], 'version', version)
if tonumber(ARGV[1]) == 0 then redis.call('SADD', KEYS[5], ARGV[3]) end
if ARGV[2] ~= '' then
  redis.call('HSET', KEYS[4], ARGV[2], version)
  redis.call('RPUSH', KEYS[6], ARGV[7])
  redis.call('EXPIRE', KEYS[6], tonumber(ARGV[6]))
end
if ARGV[5] ~= '' then redis.call('XACK', KEYS[7], ARGV[4], ARGV[5]) end
for i = 9 + 2 * n, #ARGV do
  redis.call('XADD', KEYS[8], '*', 'r', ARGV[i])
end
return {'ok', tostring(version)}
"""

_FINISH = """
-- A command that appends nothing (rejected, duplicate): store the result, record a
-- rejection, acknowledge. KEYS: 1 result, 2 command stream, 3 rejections
-- ARGV: 1 result json ('' none), 2 ttl, 3 group, 4 entry id ('' none), 5 rejection json ('' none)
if ARGV[1] ~= '' then
  redis.call('RPUSH', KEYS[1], ARGV[1])
  redis.call('EXPIRE', KEYS[1], tonumber(ARGV[2]))
end
if ARGV[5] ~= '' then redis.call('XADD', KEYS[3], '*', 'r', ARGV[5]) end
if ARGV[4] ~= '' then redis.call('XACK', KEYS[2], ARGV[3], ARGV[4]) end
return 1
"""


@dataclass
class Append:
    """One command's events to append at ``expected`` version, with what goes with them."""

    game_id: str
    expected: int
    events: Sequence[EncodedEvent]
    command_id: str = ""
    entry: tuple[int, str] | None = None  # (partition, command stream entry id) to acknowledge
    decisions: Sequence[str] = ()  # decision request JSON documents

    @property
    def version(self) -> int:
        return self.expected + len(self.events)


@dataclass(frozen=True)
class AppendResult:
    status: str  # "ok", "duplicate" or "conflict"
    version: int


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


class ConflictError(Exception):
    """The game's log moved past the expected version: reload and decide again."""


class EventStore:
    """Append, read and snapshot game logs. Every method is one round trip or a pipeline."""

    def __init__(self, redis: Redis, keys: Keys, group: str = "engine") -> None:
        self.redis = redis
        self.keys = keys
        self.group = group
        self._append = redis.register_script(_APPEND)
        self._finish = redis.register_script(_FINISH)

    # --- writing -------------------------------------------------------------------------

    def _append_args(self, a: Append) -> tuple[list[str], list[Any]]:
        k = self.keys
        p = k.partition(a.game_id)
        keys = [
            k.log(a.game_id),
            k.events(p),
            k.meta(a.game_id),
            k.seen(a.game_id),
            k.games(p),
            k.result(a.game_id, a.command_id or "-"),
            k.commands(p),
            k.decisions(p),
        ]
        result = CommandResult(
            command_id=a.command_id, game_id=a.game_id, status="accepted", version=a.version
        )
        args: list[Any] = [
            a.expected,
            a.command_id,
            a.game_id,
            self.group,
            a.entry[1] if a.entry else "",
            RESULT_TTL_S,
            result.model_dump_json() if a.command_id else "",
            len(a.events),
        ]
        for public, secret in a.events:
            args.append(public)
            args.append(secret)
        args.extend(a.decisions)
        return keys, args

    async def append(self, a: Append) -> AppendResult:
        """Append one command's events atomically (see the module docstring)."""
        return (await self.append_many([a]))[0]

    async def append_many(self, appends: Sequence[Append]) -> list[AppendResult]:
        """Pipelined appends, executed in order: one round trip for a whole batch."""
        if not appends:
            return []
        async with self.redis.pipeline(transaction=False) as pipe:
            for a in appends:
                keys, args = self._append_args(a)
                await self._append(keys=keys, args=args, client=pipe)
            raw = await pipe.execute()
        return [AppendResult(_text(r[0]), int(r[1])) for r in raw]

    async def finish(
        self,
        game_id: str | None,
        partition: int,
        result: CommandResult | None,
        entry_id: str | None,
        rejection: str | None = None,
    ) -> None:
        """Record the outcome of a command that appended nothing, and acknowledge it."""
        k = self.keys
        # Without a result to store, any key of the partition's slot stands in for it.
        result_key, result_json = k.rejections(partition), ""
        if result is not None and game_id is not None:
            result_key = k.result(game_id, result.command_id)
            result_json = result.model_dump_json()
        keys = [result_key, k.commands(partition), k.rejections(partition)]
        args: list[Any] = [
            result_json,
            RESULT_TTL_S,
            self.group,
            entry_id or "",
            rejection or "",
        ]
        await self._finish(keys=keys, args=args)

    async def save_snapshots(self, snapshots: Sequence[tuple[str, int, dict[str, Any]]]) -> None:
        """Store (game, version, state) snapshots in one round trip."""
        async with self.redis.pipeline(transaction=False) as pipe:
            for game_id, version, snapshot in snapshots:
                data = json.dumps(snapshot, separators=(",", ":"))
                pipe.hset(self.keys.snapshot(game_id), mapping={"v": version, "s": data})
            await pipe.execute()

    async def record_final_hash(self, game_id: str, state_hash: str) -> None:
        """The hash of a finished game's final state, to check replays against; the game
        joins its partition's finished games."""
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.hset(self.keys.meta(game_id), "final_hash", state_hash)
            pipe.sadd(self.keys.finished(self.keys.partition(game_id)), game_id)
            await pipe.execute()

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
        end), in one pipelined round trip, so that no reader runs XRANGE on a log itself."""
        async with self.redis.pipeline(transaction=False) as pipe:
            for game_id, (after, upto) in ranges.items():
                top = "+" if upto is None else f"{upto}-0"
                pipe.xrange(self.keys.log(game_id), min=f"{after + 1}-0", max=top)
            logs: list[Any] = await pipe.execute()
        return {game_id: _events(entries) for game_id, entries in zip(ranges, logs, strict=True)}

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
            state = codec.restore(json.loads(snap[b"s"])) if snap else None
            for event in logs[game_id]:
                if event.version != version + 1:
                    raise ValueError(f"{game_id}: log jumps from {version} to {event.version}")
                if state is None:
                    state = codec.initial(event)
                codec.apply(state, event)
                version = event.version
            seen_ids = {_text(c): int(v) for c, v in seen.items()}
            out[game_id] = Loaded(state, version, seen_ids)
        return out

    async def game_ids(self, partition: int) -> list[str]:
        return sorted(_text(g) for g in await self.redis.smembers(self.keys.games(partition)))


def _events(entries: Any) -> list[EventEnvelope]:
    """Log entries to envelopes: the public event with its server-only part put back."""
    events = []
    for _, fields in entries:
        raw = json.loads(fields[b"e"])
        if b"s" in fields:
            raw["secret"] = json.loads(fields[b"s"])
        events.append(load_event(raw))
    return events


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value
