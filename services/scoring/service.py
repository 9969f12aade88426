"""The scoring service: follows the partition event streams and keeps the scoring tables.

SQL is the source of truth for how far it has read: each stream's last entry id is stored
in the transaction that writes the rows those entries produced, and the service reads on
from there: a :class:`~shared.bus.Follower` of the partition event streams, without a
consumer group (``XREAD``), so there is no acknowledgement that could disagree with SQL
after a crash. A batch (of one stream or several) is scored in one transaction with the
checkpoints of its streams. A checkpoint moves by compare-and-set: a second scoring process
on the same database loses the race, rolls back and reads those streams again from their
checkpoints, instead of counting anything twice; a failed batch sets its streams back to
their checkpoints too. Batches are scored one at a time (ratings span partitions). Commits
are batched by time: after a batch that was not full, the service waits out
``commit_interval_s`` before it reads again, so the events of the games that moved
meanwhile come in the next read and are committed together (a commit per move was ~12% of
``caravel up``'s CPU); the checkpoints go with them as above. Each
entry only says "this game reached version v": the service applies that game's events
from its full log (hidden parts included, it is trusted) up to v, skipping versions the
game's row says are applied already. The row (and the game held in memory)
names the event at that version: a log that went back under it (a Redis failover lost its
tail) no longer has that event there, and the game is scored again from the log.

:meth:`ScoringService.rebuild` empties the tables and replays every game of the registry from
its log through the same code, then rates the finished games in finish order. The rows of
``caravel lab run --live`` experiments SQL no longer holds (a database lost) are written
again from their games' logs and seats hashes.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections import Counter, OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import suppress
from dataclasses import dataclass
from typing import Any

import structlog
from redis.asyncio import Redis
from sqlalchemy import Engine, select

from services.runtime import Stopped, wait_for
from shared.bus import Broker, Delivery, Follower, Keys, newest_ids
from shared.bus.retention import mark_read
from shared.contracts import EventEnvelope, Notification, Seats
from shared.eventstore import Archive, EventStore, GameCodec, Held

from .cells import NO_EXPERIMENT, Group, groups_of, refresh, refresh_all
from .db import (
    CheckpointMoved,
    ScoredGame,
    advance_checkpoints,
    clear_tables,
    create_tables,
    load_checkpoints,
    table_of,
)
from .flat import restore_experiments
from .projection import (
    FinishedGame,
    GameProgress,
    Rows,
    advance,
    count_experiment,
    rate,
    snapshot_rows,
    start,
    write,
)

log = structlog.get_logger("caravel.scoring")

CACHE_GAMES = 20_000
REBUILD_CHUNK = 10
COMMIT_INTERVAL_S = 0.25  # scoring commits at most this often, unless its reads are full
NONE = Held(0, None)  # a game of which SQL holds nothing
# Scoring reads without a consumer group; it marks its SQL checkpoints as this group's
# position so that trimming keeps what it has not read (shared.bus.retention).
MARK_GROUP = "scoring"


@dataclass(frozen=True)
class RebuildReport:
    games: int
    events: int
    seconds: float

    @property
    def events_per_second(self) -> float:
        return self.events / self.seconds if self.seconds else 0.0


class ScoringService:
    def __init__(
        self,
        redis: Redis,
        keys: Keys,
        db: Engine,
        batch_size: int = 200,
        commit_interval_s: float = COMMIT_INTERVAL_S,
    ) -> None:
        self.redis = redis
        self.keys = keys
        self.db = db
        self.batch_size = batch_size
        self.commit_interval_s = commit_interval_s
        self._closing = asyncio.Event()  # ends a wait between commits at once
        self.id = f"scoring-{uuid.uuid4().hex[:8]}"
        self.store = EventStore(redis, keys, archive=Archive(db))  # archived games too
        self.codec = GameCodec()
        self.games: OrderedDict[str, GameProgress] = OrderedDict()
        self.streams = [keys.events(p) for p in keys.all_partitions()]
        self.positions: dict[str, str] = {}
        self.broker = Broker(redis, readers=keys.partitions, service="scoring")
        self.follower = Follower(self.broker, self._on_batch, batch=batch_size)
        self._scoring = asyncio.Lock()  # one batch at a time: ratings span partitions

    async def start(self) -> None:
        """Create the tables if needed, read the checkpoints and follow every stream from
        its checkpoint."""
        self._closing.clear()
        await asyncio.to_thread(create_tables, self.db)
        self.positions = await asyncio.to_thread(self._checkpoints)
        await mark_read(self.redis, MARK_GROUP, self.positions)
        await self.broker.start()
        for stream in self.streams:
            await self.follower.add(stream, self.positions[stream])

    def _checkpoints(self) -> dict[str, str]:
        with self.db.begin() as conn:
            return load_checkpoints(conn, self.streams)

    async def run(self, stop: asyncio.Event) -> None:
        """Project until ``stop`` is set (the subscribers do, batch by batch). The start
        waits for Redis and SQL: a scoring process started while Redis was away (killed
        between the process's first ping and its follow, in the chaos run) raised here, its
        task ended, and the process lived on scoring nothing (issue 25)."""
        try:
            await wait_for("Redis and the scoring tables", self.start, stop, undo=self.close)
        except Stopped:
            return
        try:
            await stop.wait()
        finally:
            await self.close()

    async def close(self) -> None:
        self._closing.set()
        await self.follower.close()
        await self.broker.stop()

    async def _on_batch(self, deliveries: list[Delivery]) -> None:
        async with self._scoring:
            await self.score(deliveries)
        if not self._full(deliveries):  # more waits in the streams: read it at once
            await self._between_commits()

    def _full(self, deliveries: Sequence[Delivery]) -> bool:
        """Some stream gave a whole batch (a read takes ``batch_size`` entries per stream)."""
        counts = Counter(d.stream for d in deliveries)
        return max(counts.values(), default=0) >= self.batch_size

    async def _between_commits(self) -> None:
        """Hold the next read for ``commit_interval_s`` (or until closing): entries written
        meanwhile stay in the streams, and the next read takes them all in one batch."""
        with suppress(TimeoutError):
            await asyncio.wait_for(self._closing.wait(), self.commit_interval_s)

    async def caught_up(self) -> bool:
        """Every stream scored up to its newest entry (for tools and tests that wait)."""
        newest = await newest_ids(self.redis, self.streams)
        return all(_id(self.positions.get(s, "0-0")) >= _id(newest[s]) for s in self.streams)

    async def score(self, deliveries: list[Delivery]) -> int:
        """Score one batch (each stream's entries in order) and move its streams'
        checkpoints in the same transaction; returns how many entries counted. A batch that
        fails, or finds a checkpoint moved by another process, sets its streams' reading
        back to their checkpoints in SQL."""
        starts = {stream: _id(self.positions[stream]) for stream in {d.stream for d in deliveries}}
        deliveries = [
            d for d in deliveries if _id(d.id) > starts[d.stream]
        ]  # read before a set-back
        if not deliveries:
            return 0
        targets: dict[str, int] = {}
        moves: dict[str, tuple[str, str]] = {}
        for d in deliveries:
            note = Notification.from_fields(d.fields)
            targets[note.game_id] = max(targets.get(note.game_id, 0), note.version)
            moves[d.stream] = (self.positions[d.stream], d.id)
        try:
            rows = await self._project(targets)
            await asyncio.to_thread(self._commit, rows, moves)
        except Exception as e:
            self._forget(targets)
            streams = sorted(moves)
            if isinstance(e, CheckpointMoved):
                log.info("another scoring process moved first", scoring=self.id, streams=streams)
            else:
                log.exception("scoring batch failed; reading it again", streams=streams)
            await self._set_back(streams)
            return 0
        read = {stream: last for stream, (_, last) in moves.items()}
        self.positions.update(read)
        await mark_read(self.redis, MARK_GROUP, read)
        for game_id in targets:  # a finished game gets no more events
            progress = self.games.get(game_id)
            if progress is not None and progress.finished_at is not None:
                del self.games[game_id]
        while len(self.games) > CACHE_GAMES:
            self.games.popitem(last=False)
        return len(deliveries)

    async def _set_back(self, streams: list[str]) -> None:
        """Read ``streams`` again from their checkpoints in SQL (kept if SQL is away)."""
        try:
            checkpoints = await asyncio.to_thread(self._checkpoints)
            self.positions.update({stream: checkpoints[stream] for stream in streams})
        except Exception:
            log.exception("could not read the checkpoints", streams=streams)
        for stream in streams:
            if stream in self.follower.streams:
                self.follower.rewind(stream, self.positions[stream])

    def _forget(self, game_ids: Iterable[str]) -> None:
        """Drop cached games whose rows were not written: they reload from SQL and the log."""
        for game_id in game_ids:
            self.games.pop(game_id, None)

    def _commit(self, rows: Rows, moves: Mapping[str, tuple[str, str]]) -> None:
        with self.db.begin() as conn:
            advance_checkpoints(conn, moves)
            write(conn, rows)
            rate(conn, rows.finished, rows.rebuilt)

    def _applied(self, game_ids: Sequence[str]) -> dict[str, Held]:
        """What SQL holds of each game: the version applied so far and its event (absent:
        none)."""
        table = table_of(ScoredGame)
        query = select(table.c.game_id, table.c.version, table.c.event_id).where(
            table.c.game_id.in_(game_ids)
        )
        with self.db.connect() as conn:
            return {game_id: Held(v, event_id) for game_id, v, event_id in conn.execute(query)}

    async def _project(self, targets: Mapping[str, int]) -> Rows:
        """Bring each game's rows up to its target version. Each game is read from the event
        it holds (in memory, or in SQL for a game not cached), to check the log still has
        it: if the log went back (a failover), the game's rows are projected again from the
        log as it is now, even when the log is no longer past what the rows hold."""
        held = await self._held(targets)
        new = [g for g in targets if g not in self.games and targets[g] > held[g].version]
        (logs, ids), seats = await asyncio.gather(
            self.store.read_past({g: self._range(g, targets[g], held[g]) for g in targets}),
            self._seats(new),
        )
        rows = Rows()
        rows.rebuilt = {g for g, h in held.items() if h.went_back(ids[g] or _id_at(logs[g], h))}
        if rows.rebuilt:
            log.warning("log went back; scoring the games again", games=sorted(rows.rebuilt))
            self._forget(rows.rebuilt)
            again, again_seats = await self._read(
                sorted(rows.rebuilt), {g: (0, targets[g]) for g in rows.rebuilt}
            )
            logs.update(again)
            seats.update(again_seats)
        applied = {g: 0 if g in rows.rebuilt else h.version for g, h in held.items()}
        for game_id in sorted(targets):
            if targets[game_id] <= applied[game_id]:
                continue  # applied already (a notification read again)
            progress = self.games.get(game_id) or self._begin(game_id, logs[game_id], seats)
            if progress is not None:
                self._apply(progress, logs[game_id], applied[game_id], rows)
        return rows

    async def _held(self, targets: Mapping[str, int]) -> dict[str, Held]:
        """What is held of each game: its progress in memory, else its row in SQL (none:
        version 0)."""
        missing = [g for g in targets if g not in self.games]
        in_sql = await asyncio.to_thread(self._applied, missing) if missing else {}
        return {
            g: Held(p.version, p.event_id) if (p := self.games.get(g)) else in_sql.get(g, NONE)
            for g in targets
        }

    def _range(self, game_id: str, target: int, held: Held) -> tuple[int, int | None]:
        """What to read of a game's log (:meth:`EventStore.read_past`): after the event
        held (its id read to check it) up to the target; for a game not in memory with
        events to apply, from its start (it is replayed up to the event held, which is
        checked on the way)."""
        if game_id not in self.games and target > held.version:
            return (0, target)
        return (held.version, max(target, held.version))

    async def _read(
        self, new: Sequence[str], ranges: Mapping[str, tuple[int, int | None]]
    ) -> tuple[dict[str, list[EventEnvelope]], dict[str, Seats]]:
        """The games' log ranges, and who plays the seats of the ``new`` ones, together."""
        logs, seats = await asyncio.gather(self.store.read_many(ranges), self._seats(new))
        return logs, seats

    async def _seats(self, game_ids: Sequence[str]) -> dict[str, Seats]:
        """The lobby's seats of each game (an archived game's from the archive)."""
        return await self.store.seats(game_ids)

    def _begin(
        self, game_id: str, events: Sequence[EventEnvelope], seats: Mapping[str, Seats]
    ) -> GameProgress | None:
        if not events or events[0].version != 1:
            log.warning("a game's log does not start at version 1", game=game_id)
            return None
        progress = start(self.codec, events[0], seats[game_id])
        self.games[game_id] = progress
        return progress

    def _apply(
        self, progress: GameProgress, events: Sequence[EventEnvelope], applied: int, rows: Rows
    ) -> None:
        """Apply a game's events: silently up to ``applied`` (already in SQL), with rows
        after it; then the game's row and standings."""
        for event in events:
            advance(progress, event, rows if event.version > applied else None)
        snapshot_rows(progress, rows)

    # --- rebuild ---------------------------------------------------------------------------

    async def rebuild(self, on_game: Callable[[int], None] | None = None) -> RebuildReport:
        """Empty the tables and replay every game of the registry from its log.

        The streams' positions are taken before the logs are read, so the live service
        resumes from there and finds any later events' versions already applied or new.
        Stop the live service while this runs: it empties the tables under it."""
        started = time.perf_counter()
        await asyncio.to_thread(create_tables, self.db)
        await asyncio.to_thread(clear_tables, self.db)
        positions = await newest_ids(self.redis, self.streams)
        async with self.redis.pipeline(transaction=False) as pipe:
            for p in self.keys.all_partitions():  # the games in Redis and the archived ones
                pipe.smembers(self.keys.games(p))  # (no SUNION: a cluster pipeline refuses
                pipe.smembers(self.keys.archived(p))  # commands of several keys)
            replies: list[Any] = await pipe.execute()
        game_ids = sorted({g.decode() for members in replies for g in members})
        await asyncio.to_thread(self._set_checkpoints, positions)
        await mark_read(self.redis, MARK_GROUP, positions)
        self.games.clear()
        finished: list[FinishedGame] = []
        live: set[Group] = set()  # the groups of `caravel lab run --live` games: kept rows
        experiments: dict[str, dict[str, Any]] = {}  # their experiments' rows, should SQL lack them
        writing: asyncio.Future[None] | None = None
        events = 0
        for i in range(0, len(game_ids), REBUILD_CHUNK):
            chunk = game_ids[i : i + REBUILD_CHUNK]
            logs, seats = await self._read(chunk, dict.fromkeys(chunk, (0, None)))
            rows = Rows(cells=False)  # summed once, at the end
            for game_id in chunk:
                progress = self._begin(game_id, logs[game_id], seats)
                if progress is not None:
                    self._apply(progress, logs[game_id], 0, rows)
                    del self.games[game_id]
                    if progress.experiment is not None:
                        planned = seats[game_id].experiment_games
                        count_experiment(experiments, progress, planned)
            finished += rows.finished
            live |= {g for g in groups_of(rows.flat_results) if g[1] != NO_EXPERIMENT}
            events += rows.events
            if writing is not None:  # one chunk is written while the next is projected
                await writing
            writing = asyncio.ensure_future(asyncio.to_thread(self._write, rows))
            if on_game is not None:
                on_game(len(chunk))
        if writing is not None:
            await writing
        await asyncio.to_thread(self._rate, finished, live, list(experiments.values()))
        return RebuildReport(len(game_ids), events, time.perf_counter() - started)

    def _set_checkpoints(self, positions: Mapping[str, str]) -> None:
        with self.db.begin() as conn:
            load_checkpoints(conn, self.streams)
            advance_checkpoints(conn, {s: ("0-0", new) for s, new in positions.items()})

    def _write(self, rows: Rows) -> None:
        with self.db.begin() as conn:
            write(conn, rows)

    def _rate(
        self,
        finished: Sequence[FinishedGame],
        live: Iterable[Group],
        experiments: Sequence[Mapping[str, Any]],
    ) -> None:
        with self.db.begin() as conn:
            rate(conn, finished)
            restore_experiments(conn, experiments)  # those of live runs SQL lost
            refresh_all(conn)  # the analytics cells of every projected game
            refresh(conn, live)  # and of the games played live under an experiment


def _id_at(events: Sequence[EventEnvelope], held: Held) -> str | None:
    """The id of the event at the version held among ``events`` (a whole log read)."""
    return next((e.event_id for e in events if e.version == held.version), None)


def _id(entry_id: str) -> tuple[int, int]:
    """A stream entry id, comparable."""
    ms, _, seq = entry_id.partition("-")
    return int(ms), int(seq or 0)
