"""The views projection: each game's spectator view and what each seat sees, kept in Redis.

It follows the partition event streams through its own consumer group, one FastStream batch
subscriber per partition stream (``shared.bus.GroupConsumer``). An entry only says
"this game changed, up to this version": the projector brings its cached state of the game
up to the newest version in the game's log (the engine's log, server side, so it can apply
the events' hidden parts), then stores the game's ``view`` for a spectator and, per seat,
how that seat's view differs from it (``shared.views``). A Lua script writes a view only if
it is newer than the stored one, so several projectors, redeliveries and any order of
notifications all leave the newest view. Reads never replay a log.

A log that went back (a failover lost its acknowledged tail, and other events were written
at the same versions) is noticed twice. A projector catching up a game it holds finds the
event it applied last no longer in the log, and loads the game again from the log. And the
script writing a view keeps, with its version, the id of the event at that version: a view
no newer than the stored one replaces it when the log has no event, or another event, at the
stored version. So a game loaded afresh (a projector started again, a game out of its
cache) replaces a view of a lost log too, and a view of the log as it is now is never
replaced by an older one.

It projects only the games someone reads (issue 24: no one reads the views of a table of
humans on their sockets, which get events, not views). A reader names the games it reads on
their partitions' wanted views' streams (``shared.bus.wants``; :class:`shared.views.ViewWaiter`
does, and waits for the log's version then); every projector follows every partition's
wants stream from its start (and the wants of the last minutes before it), projects a game
when it is wanted and, while it stays wanted, at each of its events. The events of other
games are acknowledged unread. A partition whose wants stream cannot be read (its shard
away) is followed once it can be, its recent wants honoured then: it holds up no other
partition's wants, at the start either (issue 25: one global wants stream on one shard
stopped every game's views while that shard was away).

It reads only the event streams of the partitions with a wanted game: with nobody reading
views (humans on their sockets) it reads none, instead of every partition's every event.
A partition is read from the moment one of its games is wanted: its group's position is
moved to the stream's tail, then every wanted game of the partition is projected from its
log (what came before the tail is in the log; what comes after is delivered). A partition
whose games are no longer wanted is let go (every ``PARK_S``). Trimming keeps every entry a
group has not been delivered (``shared.bus.retention``), so a group left where it stopped
would hold its stream untrimmed for good: the projection moves its position on the streams
it does not read forward to the retention's edge (never back, so a projector beside it
that reads the partition loses nothing; entries still pending there are acknowledged),
which keeps nothing the retention would not keep anyway.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import structlog
from redis.asyncio import Redis

from services.runtime import Stopped, wait_for
from shared.bus import Broker, Delivery, Follower, GroupConsumer, Keys, ensure_group
from shared.bus.faults import transient
from shared.bus.retention import advance_group
from shared.bus.scripts import Batch
from shared.bus.wants import recent_wants, trim_wants, wanted_until
from shared.contracts import Notification
from shared.eventstore import EventStore, GameCodec, Held
from shared.eventstore.scripts import VIEWS
from shared.games import api
from shared.loops import keep_running, logged_failure
from shared.views import view_documents

log = structlog.get_logger("caravel.views")

GROUP = "views"
CACHE_GAMES = 20_000
BATCH = 500
FORGET_S = 60.0
RETRY_S = 0.5  # a refused projection of wants is tried again this much later
FOLLOW_S = 1.0  # how often the wants streams not followed yet (their shard away) are tried
PARK_S = 10.0  # how often the partitions with no wanted game are let go
# A group position on a partition not read moves at most this close to now (or the
# retention's edge, if further): a projector beside it reading the partition is never
# overtaken.
PARK_MARGIN_S = 60.0


@dataclass
class Projected:
    """A game as the projector holds it: its state at ``version`` (the event ``event_id``;
    None: unknown, loaded from a snapshot) and how many seats it has (counted once, from its
    results)."""

    state: Any
    version: int
    seats: int
    event_id: str | None = None

    @classmethod
    def of(cls, state: Any, version: int, event_id: str | None = None) -> Projected:
        return cls(state, version, len(api.of(state).results(state)), event_id)


class ViewProjector:
    def __init__(
        self,
        redis: Redis,
        keys: Keys,
        consumer: str | None = None,
        claim_idle_ms: int = 10_000,
        retention_s: float = 600.0,
        dead_after_ms: int = 0,
    ) -> None:
        self.redis = redis
        self.retention_s = retention_s
        self.keys = keys
        self.store = EventStore(redis, keys)
        self.codec = GameCodec()
        self.broker = Broker(redis, readers=keys.partitions, service="views")
        self.consumer = GroupConsumer(
            self.broker,
            redis,
            GROUP,
            consumer or f"views-{uuid.uuid4().hex[:8]}",
            keys,
            self.handle,
            batch=BATCH,
            claim_idle_ms=claim_idle_ms,
            dead_after_ms=dead_after_ms,
        )
        self.games: OrderedDict[str, Projected] = OrderedDict()
        self.wanted: dict[str, float] = {}  # game → until when (Unix time) it is read
        self._wants = Follower(self.broker, self._wanted, batch=BATCH)
        # One projection at a time per partition (wants and events): a game is projected by
        # one at a time, and a partition whose shard fails holds up its own games only.
        self._projecting: dict[int, asyncio.Lock] = {}
        self._forgotten = 0.0  # when the wants that ran out were last dropped
        self._trimmed = 0.0  # when the wants streams were last trimmed
        # Wants stream → the last want projected: read again from there on a failure.
        self._wants_read: dict[str, str] = {}
        self._unfollowed_runs = 0  # calls of :meth:`follow_wants` in a row that left some out
        self._read: set[int] = set()  # the partitions whose event stream is read
        self._reading = asyncio.Lock()  # partitions taken up and let go one at a time
        self.started = asyncio.Event()  # following the wants (for tests and tools)

    async def start(self) -> None:
        """Follow the wanted views of every partition that answers (projecting the games
        wanted lately: some may have been wanted while no projector ran), reading the event
        streams of their partitions; the others are followed once they answer
        (:meth:`follow_wants`). Raises when no partition answers (Redis away): :meth:`run`
        tries again. A start that waited for one global wants stream served no game while
        its shard was away (issue 25)."""
        await self.broker.start()
        failed = await self.follow_wants()
        if failed and not self._wants.streams:
            raise failed[0]
        self.started.set()

    async def follow_wants(self) -> list[Exception]:
        """Follow the wants streams not followed yet, each from its tail, having projected
        its wants of the last :data:`~shared.bus.wants.KEPT_S` (the games whose projection is
        refused now are projected at their next event or read: a read that finds no view
        asks again). Returns the errors of the streams that could not be read (their shard
        away): they are tried again at the next call."""
        streams = [self.keys.view_wants(p) for p in self.keys.all_partitions()]
        missing = [stream for stream in streams if stream not in self._wants]
        if not missing:
            return []
        outcomes = await asyncio.gather(
            *(recent_wants(self.redis, stream) for stream in missing), return_exceptions=True
        )
        failed = _transient_failures(outcomes)
        self._log_unfollowed(failed)
        read = {
            stream: outcome
            for stream, outcome in zip(missing, outcomes, strict=True)
            if not isinstance(outcome, BaseException)
        }
        now = time.time()
        recent = [(g, until) for _, wants in read.values() for g, until in wants if until > now]
        refused = await self._want(recent)
        if refused:
            log.warning("wanted views not projected at their start", partitions=sorted(refused))
        for stream, (tail, _) in read.items():
            self._wants_read[stream] = tail
            await self._wants.add(stream, tail)
        return failed

    def _log_unfollowed(self, failed: list[Exception]) -> None:
        """Log the wants streams not followed yet as any run of failed retries is logged
        (:func:`~shared.loops.logged_failure`): the first call of a run with the traceback,
        the 2nd, 4th, 8th... as one line. Tried every :data:`FOLLOW_S`, a shard (or Redis)
        away had the line logged once a second for as long as it was away (issue 25)."""
        if not failed:
            self._unfollowed_runs = 0
            return
        self._unfollowed_runs += 1
        runs = self._unfollowed_runs
        if logged_failure(runs):
            error = failed[0] if runs == 1 else None
            log.warning(
                "wanted views not followed yet",
                streams=len(failed),
                failures=runs,
                error=str(failed[0]),
                exc_info=error,
            )

    async def run(self, stop: asyncio.Event) -> None:
        """Project until ``stop``; every claim time / 2, take over what another projector
        left pending that long (it died); a batch that fails stays pending. The start waits
        for Redis (a partition that does not answer is followed later)."""
        try:
            await wait_for("the wanted views' streams", self.start, stop, undo=self.close)
        except Stopped:
            return
        try:
            tidying = keep_running(
                stop, self.tidy, log, "views: letting partitions go failed", period_s=PARK_S
            )
            following = keep_running(
                stop, self.follow_wants, log, "views: following wants failed", period_s=FOLLOW_S
            )
            await asyncio.gather(self.consumer.run(stop), tidying, following)
        finally:
            await self.close()

    async def close(self) -> None:
        """Stop following the wants and the broker (at the end, or after a failed start)."""
        try:
            await self._wants.close()
        finally:
            await self.broker.stop()

    async def handle(self, deliveries: Sequence[Delivery]) -> None:
        """Project the wanted games the entries name, then acknowledge the entries."""
        now = time.time()
        changed = {
            game_id
            for d in deliveries
            if self.wanted.get(game_id := Notification.from_fields(d.fields).game_id, 0) > now
        }
        if changed:
            await self.project(sorted(changed))
        await self.consumer.ack(deliveries)

    async def _wanted(self, deliveries: list[Delivery]) -> None:
        """Wants read from the streams: project their games now. The streams of the
        partitions whose projection Redis refuses for a while (away, restarting, short of
        replicas) are read again after a pause: the follower moved past them before handing
        them over, and a game waiting on a decision gets no event that would project it,
        while its reader asks again only :data:`~shared.views.ASK_AGAIN_S` later (issue 25: a
        game stuck in the chaos run, its player waiting for a view no one wrote after a Redis
        kill). A stream's wants are its partition's games only: the others move on."""
        refused = await self._want([wanted_until(d.id, d.fields) for d in deliveries])
        newest = {d.stream: d.id for d in deliveries}
        for stream, last in newest.items():
            if self.keys.partition_of(stream) in refused:
                self._wants.rewind(stream, self._wants_read[stream])
            else:
                self._wants_read[stream] = last
        if refused:
            log.warning("wanted views not projected; read again", partitions=sorted(refused))
            await asyncio.sleep(RETRY_S)

    async def _want(self, wants: Sequence[tuple[str, float]]) -> set[int]:
        """Keep each game wanted until the latest time asked (forgetting the wants that
        ran out, once a minute), and project the games now, up to the newest version of
        their logs: partition by partition, so that a shard in a fault (a master failing
        over) delays only its own games' views. Returns the partitions whose projection
        Redis refused (any other error is raised). One projection for all used to fail as
        a whole, and every new game's first view, on every shard, waited for the failover
        (issue 25)."""
        now = time.time()
        if now - self._forgotten > FORGET_S:
            self._forgotten = now
            self._forget(now)
        for game_id, until in wants:
            if until > self.wanted.get(game_id, 0):
                self.wanted[game_id] = until
        opened = await self._take_up(now)
        games = {game_id for game_id, _ in wants}
        games.update(g for g in self._wanted_now(now) if self.keys.partition(g) in opened)
        by_partition: dict[int, list[str]] = {}
        for game_id in sorted(games):
            by_partition.setdefault(self.keys.partition(game_id), []).append(game_id)
        # The partitions at once: a shard's fault fails its own partitions' games, and its
        # failures (a pipeline to a node away is tried again 0.25 s later) add up to no
        # one else's wait. One after the other, a failover held every new want for about
        # 0.25 s per wanted partition of the shard away, again at each retry.
        partitions = sorted(by_partition)
        outcomes = await asyncio.gather(
            *(self._project_partition(by_partition[p]) for p in partitions),
            return_exceptions=True,
        )
        _transient_failures(outcomes)
        return {
            p
            for p, outcome in zip(partitions, outcomes, strict=True)
            if isinstance(outcome, BaseException)
        }

    async def _project_partition(self, ordered: list[str]) -> None:
        for start in range(0, len(ordered), BATCH):
            await self.project(ordered[start : start + BATCH])

    def _forget(self, now: float) -> None:
        for game_id in [g for g, until in self.wanted.items() if until <= now]:
            del self.wanted[game_id]

    def _wanted_now(self, now: float) -> list[str]:
        return [game_id for game_id, until in self.wanted.items() if until > now]

    async def _take_up(self, now: float) -> set[int]:
        """Read the event streams of the partitions with a wanted game not read yet, each
        from its tail (its group moved there: the caller projects the partition's wanted
        games from their logs after this); returns those partitions."""
        async with self._reading:
            wanted = {self.keys.partition(g) for g in self._wanted_now(now)}
            opened = wanted - self._read
            if not opened:
                return opened
            streams = [self.keys.events(p) for p in sorted(opened)]
            moved = []
            for stream in streams:
                try:
                    await ensure_group(self.redis, stream, GROUP)
                    moved.append(stream)
                except Exception:  # its shard fails: the subscriber makes it once it is back
                    log.warning("views group not made yet", stream=stream, exc_info=True)
            failed = await advance_group(self.redis, GROUP, moved, "$")
            if failed:  # read from where the group is, once its shard is back: no gap
                log.warning("views group not moved to the tail", streams=sorted(failed))
            for stream in streams:
                await self.consumer.subscribe(stream)
            self._read |= opened
            return opened

    async def tidy(self) -> None:
        """Let go of the partitions none of whose games is wanted any longer, and move the
        group forward on every partition not read, to the retention's edge (at most
        ``PARK_MARGIN_S`` from now), its entries pending there acknowledged: what it has
        not been delivered no longer holds the stream's trimming back. Once a minute, trim
        the wants that ran out from the wants streams followed (FastStream's publish cannot
        trim by age)."""
        now = time.time()
        async with self._reading:
            self._forget(now)
            wanted = {self.keys.partition(g) for g in self._wanted_now(now)}
            for p in sorted(self._read - wanted):
                await self.consumer.unsubscribe(self.keys.events(p))
                self._read.discard(p)
            unread = [p for p in self.keys.all_partitions() if p not in self._read]
        parked = [self.keys.events(p) for p in unread]
        edge_ms = int((now - max(self.retention_s, PARK_MARGIN_S)) * 1000)
        edge = f"{max(edge_ms, 0)}-0"
        failed = await advance_group(self.redis, GROUP, parked, edge, ack_below=True)
        if failed:  # moved at a later round
            log.warning("views group not moved on", streams=sorted(failed))
        if now - self._trimmed > FORGET_S:  # each stream's trim left to the next if refused
            self._trimmed = now
            await asyncio.gather(*(trim_wants(self.redis, s) for s in self._wants.streams))

    async def project(self, game_ids: Sequence[str]) -> None:
        """Bring each game's view up to the newest version of its log, with their partitions'
        projections held off (their locks taken in order). One lock for all made every
        partition's views wait on a projection of a shard failing over: its pipelines are
        tried again 0.25 s later, and the other shards' views (which the bots play from)
        lagged behind (issue 25: the other shards at a quarter of their events/s while a
        master failed over)."""
        locks = [
            self._projecting.setdefault(p, asyncio.Lock())
            for p in sorted({self.keys.partition(g) for g in game_ids})
        ]
        taken: list[asyncio.Lock] = []
        try:
            for lock in locks:
                await lock.acquire()
                taken.append(lock)
            await self._project(game_ids)
        finally:
            for lock in taken:
                lock.release()

    async def _project(self, game_ids: Sequence[str]) -> None:
        missing = [g for g in game_ids if g not in self.games]
        behind = [g for g in game_ids if g in self.games]
        await self._load(missing)
        await self._catch_up(behind)
        async with Batch(self.redis) as batch:
            for game_id in game_ids:
                if game_id in self.games:
                    self._store_view(batch, game_id)
            await batch.execute()
        while len(self.games) > CACHE_GAMES:
            self.games.popitem(last=False)

    async def _load(self, game_ids: Sequence[str]) -> None:
        """Cache games not cached yet: snapshot and later events (a game with no log yet
        stays out)."""
        if game_ids:
            for game_id, loaded in (await self.store.load_many(game_ids, self.codec)).items():
                if loaded.state is not None:
                    self.games[game_id] = Projected.of(
                        loaded.state, loaded.version, loaded.event_id
                    )

    async def _catch_up(self, game_ids: Sequence[str]) -> None:
        """Apply the events cached games lack, read in one round trip from the event each
        holds; the games whose log went back are loaded again."""
        game_ids = [g for g in game_ids if g in self.games]  # not let go meanwhile
        held = {g: Held(self.games[g].version, self.games[g].event_id) for g in game_ids}
        logs = await self.store.read_many({g: h.range() for g, h in held.items()})
        rebuilt = {g for g in game_ids if held[g].rolled_back(logs[g])}
        for game_id in sorted(rebuilt):
            log.warning("log went back; projecting the game again", game=game_id)
            self.games.pop(game_id, None)
        await self._load(sorted(rebuilt))
        for game_id in set(game_ids) - rebuilt:
            projected = self.games.get(game_id)
            if projected is None:  # let go meanwhile (the cache is full): loaded when next due
                continue
            for event in logs[game_id]:
                if event.version == projected.version:
                    projected.event_id = event.event_id  # known now (was a snapshot's)
                elif event.version == projected.version + 1:
                    self.codec.apply(projected.state, event)
                    projected.version, projected.event_id = event.version, event.event_id

    def _store_view(self, batch: Batch, game_id: str) -> None:
        projected = self.games[game_id]
        state = projected.state
        documents = view_documents(api.of(state), state, projected.seats)
        fields = [value for item in documents.items() for value in item]
        args = [projected.version, game_id, projected.event_id or "", *fields]
        updates = self.keys.view_updates(self.keys.partition(game_id))
        batch.call(VIEWS["write"], [self.keys.view(game_id), updates, self.keys.log(game_id)], args)


def _transient_failures(outcomes: Sequence[Any]) -> list[Exception]:
    """The errors among ``outcomes`` (of a gather), each a store's passing fault (refused,
    away, short of replicas); any other error is raised."""
    failed = []
    for outcome in outcomes:
        if isinstance(outcome, BaseException):
            if not isinstance(outcome, Exception) or not transient(outcome):
                raise outcome
            failed.append(outcome)
    return failed
