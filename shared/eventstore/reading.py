"""Reading game logs: events by version range (from Redis, or the archive for a finished
game), snapshots plus later events into a state, and what the store knows of a game
(version, seats, seen command ids, final hash). The writing half is :mod:`.store`."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, NamedTuple, Protocol, TypeVar

from redis.asyncio import Redis

from shared.bus.connection import round_trip
from shared.bus.keys import Keys
from shared.contracts import (
    EventEnvelope,
    Seats,
    load_json,
    read_event,
    stored_event_id,
)
from shared.redis_replies import text as _text


class ArchiveReader(Protocol):
    """What the event store reads from the archive of finished games (``archive.Archive``);
    its methods block (SQL), so the store calls them in a thread."""

    def logs(self, game_ids: Sequence[str]) -> dict[str, list[EventEnvelope]]: ...

    def seats(self, game_ids: Sequence[str]) -> dict[str, dict[str, str]]: ...

    def kept(self, game_ids: Sequence[str]) -> set[str]: ...


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


class PendingDecisions(NamedTuple):
    """The decision requests every seat has at a game's version, as the append that made
    the version kept them in the game's meta (the engine's own requests: each seat's legal
    commands, nothing hidden from that seat), and whether the game is over."""

    version: int
    over: bool
    requests: list[dict[str, Any]]

    def legal(self, seat: int) -> list[dict[str, Any]]:
        """The seat's legal commands (empty: it has nothing to decide). A seat with two
        requests at once has the same commands in each: the rules' legal commands of the
        seat."""
        for request in self.requests:
            if request["seat"] == seat:
                legal: list[dict[str, Any]] = request["legal_commands"]
                return legal
        return []


# The requests of the pending decisions parsed last, by their JSON as read: an HTTP move
# reads the same meta twice (its answer's legal commands, then the other seat's GET /legal
# at that version) and parses it once (a game's requests list a seat's every legal command,
# ~1 KB of JSON in The Age of Discovery, issue 24). Cleared whole once this many are kept.
PARSED_KEPT = 1024
_parsed: dict[bytes, list[dict[str, Any]]] = {}


def pending_of(reply: Sequence[Any]) -> PendingDecisions | None:
    """:meth:`EventReader.pending` of its read's reply. Its requests may be those of an
    earlier equal read: never to be changed."""
    version, at, over, raw = reply
    if raw is None or version is None or at != version:
        return None
    requests = _parsed.get(raw)
    if requests is None:
        if len(_parsed) >= PARSED_KEPT:
            _parsed.clear()
        requests = _parsed[raw] = load_json(raw)
    return PendingDecisions(int(version), over == b"1", requests)


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


class EventReader:
    """Read game logs (the reading half of :class:`~.store.EventStore`). Every method is one
    round trip or a pipeline (reading an archived game takes one more, and a query of the
    archive)."""

    def __init__(self, redis: Redis, keys: Keys, archive: ArchiveReader | None = None) -> None:
        self.redis = redis
        self.keys = keys
        self.archive = archive

    async def version(self, game_id: str) -> int:
        raw = await self.redis.hget(self.keys.meta(game_id), "version")
        return int(raw) if raw else 0

    async def pending(self, game_id: str) -> PendingDecisions | None:
        """The decision requests of the game's version, from its meta in one round trip;
        None when the meta keeps none at that version (no game, an archived one, a log
        moved in, an append whose engine gave none): read the views then."""
        (reply,) = await round_trip(self.redis, [self.pending_command(game_id)])
        return pending_of(reply)

    def pending_command(self, game_id: str) -> tuple[str, ...]:
        """:meth:`pending`'s read as a command (its reply for :func:`pending_of`), to send
        on a connection with others (after a move's wait for its answer)."""
        return ("HMGET", self.keys.meta(game_id), "version", "pending_version", "over", "pending")

    async def versions(self, game_ids: Sequence[str]) -> dict[str, int]:
        """Each game's log version (0: no game in Redis), in one round trip."""
        if not game_ids:
            return {}
        async with self.redis.pipeline(transaction=False) as pipe:
            for game_id in game_ids:
                pipe.hget(self.keys.meta(game_id), "version")
            found: list[Any] = await pipe.execute()
        return {g: int(v) if v else 0 for g, v in zip(game_ids, found, strict=True)}

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
        logs = await self._entries({g: (after + 1, upto) for g, (after, upto) in ranges.items()})
        out = {game_id: _events(entries) for game_id, entries in zip(ranges, logs, strict=True)}
        for game_id in await self._archived_logs(ranges, [g for g, e in out.items() if not e], out):
            after = ranges[game_id][0]
            out[game_id] = [e for e in out[game_id] if e.version > after]
        return out

    async def read_past(
        self, ranges: Mapping[str, tuple[int, int | None]]
    ) -> tuple[dict[str, list[EventEnvelope]], dict[str, str | None]]:
        """:meth:`read_many`'s events in ``(after, upto]``, with the id of each game's event
        at ``after`` (None: the log has none there, or ``after`` is 0), read in the same
        round trip: a consumer checks by it that the log still has the event it holds
        (:class:`~.store.Held`), and only its id is read (:func:`stored_event_id`), not
        the whole event."""
        logs = await self._entries({g: (max(a, 1), upto) for g, (a, upto) in ranges.items()})
        out: dict[str, list[EventEnvelope]] = {}
        ids: dict[str, str | None] = {}
        gone = []  # games of which Redis has nothing in the range: archived, or none
        for (game_id, (after, _)), entries in zip(ranges.items(), logs, strict=True):
            held = bool(entries) and after > 0 and _version(entries[0][0]) == after
            ids[game_id] = stored_event_id(entries[0][1][b"e"]) if held else None
            out[game_id] = _events(entries[1:] if held else entries)
            if not entries:
                gone.append(game_id)
        for game_id in await self._archived_logs(ranges, gone, out):
            after = ranges[game_id][0]
            ids[game_id] = next((e.event_id for e in out[game_id] if e.version == after), None)
            out[game_id] = [e for e in out[game_id] if e.version > after]
        return out, ids

    async def _entries(self, ranges: Mapping[str, tuple[int, int | None]]) -> list[Any]:
        """Each game's log entries of versions ``first`` to ``upto`` (None: the end), in one
        pipelined round trip."""
        async with self.redis.pipeline(transaction=False) as pipe:
            for game_id, (first, upto) in ranges.items():
                top = "+" if upto is None else f"{upto}-0"
                pipe.xrange(self.keys.log(game_id), min=f"{first}-0", max=top)
            logs: list[Any] = await pipe.execute()
        return logs

    async def _archived_logs(
        self,
        ranges: Mapping[str, tuple[int, int | None]],
        empty: Sequence[str],
        out: dict[str, list[EventEnvelope]],
    ) -> list[str]:
        """Put in ``out`` the events of those of the ``empty`` games that are archived, from
        ``after`` (included) to ``upto``; returns those games."""
        archived = await self.archived(empty)
        if not archived or self.archive is None:
            return []
        found = await asyncio.to_thread(self.archive.logs, archived)
        for game_id in archived:
            after, upto = ranges[game_id]
            out[game_id] = [
                e
                for e in found.get(game_id, [])
                if e.version >= after and (upto is None or e.version <= upto)
            ]
        return archived

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
        """A game of that id is in Redis or in the archive (a fault reading it is raised)."""
        return bool((await self._existing([game_id], raise_on_error=True))[game_id])

    async def existing(self, game_ids: Sequence[str]) -> dict[str, bool | None]:
        """Whether each game is in Redis or in the archive, as :meth:`exists` tells of one:
        one pipelined round trip for all, of a command a partition (a cluster's pipeline is
        sent node by node), one more where some are missing, and one query of the archive
        for those still not found. None: not known now (its shard answered with a fault):
        nothing is concluded of a game whose keys were not read."""
        return await self._existing(game_ids, raise_on_error=False)

    async def _existing(
        self, game_ids: Sequence[str], raise_on_error: bool
    ) -> dict[str, bool | None]:
        """:meth:`existing`; with ``raise_on_error``, a fault is raised instead. First one
        ``EXISTS`` of their metas for each partition's games (one slot: every game in Redis
        has its meta), which counts them all there in the usual case; the games of a
        partition where some are missing are then looked at one by one: their log or meta,
        their id among the partition's games and archived games. A game's keys are read
        before its partition's archived set: archiving deletes them and adds its id there
        in one script, so one of the two reads sees it (and its archive row is written
        before either)."""
        if not game_ids:
            return {}
        k = self.keys
        by_partition: dict[int, list[str]] = {}
        for game_id in dict.fromkeys(game_ids):
            by_partition.setdefault(k.partition(game_id), []).append(game_id)
        async with self.redis.pipeline(transaction=False) as pipe:
            for games in by_partition.values():
                pipe.exists(*map(k.meta, games))
            counts: list[Any] = await pipe.execute(raise_on_error=raise_on_error)
        out: dict[str, bool | None] = {}
        unsure = []  # the games of a partition where some are missing
        for games, count in zip(by_partition.values(), counts, strict=True):
            if count == len(games):
                out.update(dict.fromkeys(games, True))
            else:
                unsure += games
        if not unsure:
            return out
        async with self.redis.pipeline(transaction=False) as pipe:
            for game_id in unsure:
                p = k.partition(game_id)
                pipe.exists(k.meta(game_id), k.log(game_id))
                pipe.sismember(k.games(p), game_id)
                pipe.sismember(k.archived(p), game_id)
            found: list[Any] = await pipe.execute(raise_on_error=raise_on_error)
        absent = []
        for i, game_id in enumerate(unsure):
            replies = found[3 * i : 3 * i + 3]
            if any(r for r in replies if not isinstance(r, Exception)):
                out[game_id] = True
            elif any(isinstance(r, Exception) for r in replies):
                out[game_id] = None
            else:
                out[game_id] = False
                absent.append(game_id)
        if absent and self.archive is not None:
            for game_id in await asyncio.to_thread(self.archive.kept, absent):
                out[game_id] = True
        return out

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
        """The command ids appended to the game (:func:`~shared.contracts.command_key`),
        each with the version after its events."""
        async with self.redis.pipeline(transaction=False) as pipe:
            pipe.hgetall(self.keys.meta(game_id))
            pipe.hgetall(self.keys.seen(game_id))
            meta, old = await pipe.execute()
        return _seen_ids(meta, old)

    async def load(self, game_id: str, codec: Codec[S]) -> Loaded[S]:
        """Snapshot plus the events after it; ``state`` is None for a game with no log."""
        return (await self.load_many([game_id], codec))[game_id]

    async def load_many(self, game_ids: Sequence[str], codec: Codec[S]) -> dict[str, Loaded[S]]:
        """Load several games in two round trips (snapshots and seen ids, then the logs)."""
        k = self.keys
        async with self.redis.pipeline(transaction=False) as pipe:
            for game_id in game_ids:
                pipe.hgetall(k.snapshot(game_id))
                pipe.hgetall(k.meta(game_id))
                pipe.hgetall(k.seen(game_id))
            first: list[Any] = await pipe.execute()
        snaps = first[0::3]
        seens = [_seen_ids(meta, old) for meta, old in zip(first[1::3], first[2::3], strict=True)]
        starts = [int(snap[b"v"]) if snap else 0 for snap in snaps]
        logs = await self.read_many(
            {game_id: (start, None) for game_id, start in zip(game_ids, starts, strict=True)}
        )
        out: dict[str, Loaded[S]] = {}
        for game_id, snap, seen, version in zip(game_ids, snaps, seens, starts, strict=True):
            state = codec.restore(load_json(snap[b"s"])) if snap else None
            event_id = None
            for event in logs[game_id]:
                if event.version != version + 1:
                    raise ValueError(f"{game_id}: log jumps from {version} to {event.version}")
                if state is None:
                    state = codec.initial(event)
                codec.apply(state, event)
                version, event_id = event.version, event.event_id
            out[game_id] = Loaded(state, version, seen, event_id)
        return out

    async def game_ids(self, partition: int) -> list[str]:
        return sorted(_text(g) for g in await self.redis.smembers(self.keys.games(partition)))


def _seen_ids(meta: Mapping[bytes, bytes], old: Mapping[bytes, bytes]) -> dict[str, int]:
    """A game's appended command ids with their versions, from its meta's hash (the append
    script keeps each there, its field a seat-scoped id: the only fields with a '/') and
    its old ``seen`` hash (a game begun before the meta kept them; empty for others)."""
    ids = {_text(c): int(v) for c, v in old.items()}
    ids.update((_text(c), int(v)) for c, v in meta.items() if b"/" in c)
    return ids


def _version(entry_id: bytes | str) -> int:
    """A log entry's version: its id is ``<version>-0``."""
    text = entry_id.decode() if isinstance(entry_id, bytes) else entry_id
    return int(text.partition("-")[0])


def _events(entries: Any) -> list[EventEnvelope]:
    """Log entries to envelopes: the public event with its server-only part put back."""
    return [read_event(fields[b"e"], fields.get(b"s")) for _, fields in entries]
