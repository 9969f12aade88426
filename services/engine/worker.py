"""The engine: the single writer of every game's event log.

Engine instances share the partitions through leases that expire. For each partition it
holds, an engine runs one FastStream subscriber on the partition's command stream (started
when the lease is won, after the partition's pending entries are handled; stopped when it
goes), which hands it the commands in order, in batches. It loads each game (cached state,
or snapshot + later events), runs ``decide`` and appends the events with the expected
version through the event store's atomic script, which also records the command as seen,
answers the sender and acknowledges the entry. A command id already applied yields no new
events; a stale version is a conflict, handled by reloading and deciding again (and so is a
command that appends nothing, decided on a cached state its log is behind: a failover took
the log's tail back). Entries
left pending by a dead engine are reclaimed; an entry that keeps crashing its handler ends
in the dead-letter stream (``shared.bus.GroupConsumer``).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from operator import attrgetter, itemgetter

import structlog
from pydantic import ValidationError
from redis.asyncio import Redis
from redis.exceptions import ResponseError

from services.runtime import Stopped, wait_for
from shared.bus import (
    BODY,
    Broker,
    Coalesced,
    Delivery,
    GroupConsumer,
    Keys,
    ensure_group,
    tracing,
)
from shared.bus.faults import transient
from shared.contracts import CommandEnvelope, read_command
from shared.eventstore import Append, AppendResult, Archive, EventStore, GameCodec
from shared.loops import keep_running, log_fault
from shared.observability import metrics
from shared.settings import Settings

from .cache import GameCache
from .deciding import Decider
from .decision_requests import attach
from .leases import Leases
from .outcomes import Finish
from .recording import count_by_game, hold_ends, record_final_hashes, record_finishes

log = structlog.get_logger("caravel.engine")

GROUP = "engine"
_answered = attrgetter("answered")  # an append's result: told to its sender
_status = attrgetter("status")
_fields = attrgetter("fields")  # a delivery's fields
_body = itemgetter(BODY)  # the field of a command's JSON
ROUND_S = 0.05  # how soon a partition won is followed (its lease loop runs apart)
FOLLOW_AT_ONCE = 8  # fresh partitions followed side by side (:meth:`Engine.follow`)


class Engine:
    """One engine instance: its leases, the partitions' subscribers, and the batches of
    commands they hand it (see the module's docstring)."""

    def __init__(
        self,
        redis: Redis,
        settings: Settings | None = None,
        keys: Keys | None = None,
        engine_id: str | None = None,
        archive: Archive | None = None,
    ) -> None:
        self.redis = redis
        self.settings = settings or Settings()
        s = self.settings
        self.keys = keys or Keys(s.key_prefix, s.partitions)
        self.id = engine_id or f"engine-{uuid.uuid4().hex[:8]}"
        # With the archive, a command to an archived game finds it (and is refused, the
        # game being over) instead of finding no game at all.
        self.store = EventStore(
            redis, self.keys, GROUP, archive, s.durability_replicas, s.durability_timeout_ms
        )
        self.broker = Broker(redis, readers=self.keys.partitions, service="engine")
        self.consumer = GroupConsumer(
            self.broker,
            redis,
            GROUP,
            self.id,
            self.keys,
            Coalesced(self._on_batch),  # the partitions' batches appended in one round trip
            batch=s.batch_size,
            max_deliveries=s.max_deliveries,
            dead_after_ms=s.dead_letter_after_ms,
            claim_idle_ms=s.claim_idle_ms,
            linger_ms=s.engine_linger_ms,
            linger_max_ms=s.engine_linger_max_ms,
        )
        self.codec = GameCodec()
        self.cache = GameCache(redis, self.keys, self.store, self.codec)
        self.games = self.cache.games  # the same dict: the cached games, by id
        self.leases = Leases(redis, self.keys, self.id, s.lease_ttl_ms, self._drop, self._won)
        self.fresh: set[int] = set()  # partitions just acquired: reclaim their pending first
        self.stats: Counter[str] = Counter()
        self._next_reclaim = 0.0  # when idle pending entries are next taken over
        self._streams = {self.keys.commands(p): p for p in self.keys.all_partitions()}
        self.decider = Decider(self.keys, self.cache, self._streams, self.stats)

    @property
    def held(self) -> set[int]:
        """The partitions whose lease this engine holds."""
        return self.leases.held

    @held.setter
    def held(self, partitions: set[int]) -> None:
        self.leases.held = partitions

    # --- life cycle ------------------------------------------------------------------------

    async def start(self) -> None:
        """Create the command streams' consumer group (from id 0) for every partition, and
        connect the broker (its subscribers come with the leases). A stream whose shard
        fails now gets its group when its partition is followed (:meth:`follow`): one
        shard's fault at the start stopped the engine. Every stream failing without an
        answer (Redis away: refused, timed out) raises, and :meth:`run` tries again after
        a backoff. A server that answers with an error (NOREPLICAS, CLUSTERDOWN)
        is there, and its refusal passes: every master of a cluster just made refuses
        writes for a moment, until it counts its replica as good, and the engine ended
        there for good (its creates unanswered in test_failover_resume, every tenth run)."""
        failures = []
        for stream in self._streams:
            try:
                await ensure_group(self.redis, stream, GROUP)
            except Exception as e:
                log.warning("group not made yet", stream=stream, error=repr(e))
                failures.append(e)
        away = [e for e in failures if not isinstance(e, ResponseError)]
        if away and len(away) == len(self._streams):
            raise away[0]
        await self.broker.start()

    async def run(self, stop: asyncio.Event) -> None:
        """Serve until ``stop`` is set: leases, and the partitions' subscribers. A failed
        round (Redis away, say) is logged and retried after a backoff (``keep_running``),
        having dropped what the engine can no longer trust (:meth:`distrust`). The start
        and the first lease round wait for Redis: an engine started again while Redis was
        killed raised there, and its process lived on with no engine (issue 25)."""
        try:
            await wait_for("Redis", self._begin, stop, undo=self.broker.stop)
        except Stopped:
            return
        period = self.settings.lease_ttl_ms / 3000
        leases = [
            asyncio.create_task(
                keep_running(stop, self.rebalance, log, "lease round failed", period_s=period)
            ),
            asyncio.create_task(  # the partitions a fault dropped, won back sooner
                keep_running(stop, self.leases.regain_and_wait, log, "lease regain failed")
            ),
        ]
        try:
            await self.serve(stop)
        finally:
            for task in leases:
                task.cancel()
            await asyncio.gather(*leases, return_exceptions=True)
            try:
                await self.release_all()
            except Exception:  # stopping while Redis is away: the leases expire by themselves
                log.exception("could not release the leases", engine=self.id)

    async def serve(self, stop: asyncio.Event) -> None:
        """Follow the held partitions until ``stop`` (without taking leases: :meth:`run`
        does), then stop every subscriber and the broker."""
        try:
            await keep_running(
                stop,
                self.serve_round,
                log,
                "engine round failed",
                period_s=ROUND_S,
                on_error=self.distrust,
            )
        finally:
            await self.consumer.close()
            await self.broker.stop()

    async def serve_round(self) -> None:
        """Subscribe to the partitions won (their pending entries handled first), drop the
        ones lost, and take over idle pending entries when due."""
        await self.follow()
        now = time.monotonic()
        if now >= self._next_reclaim:
            await self.reclaim()
            self._next_reclaim = now + self.settings.claim_idle_ms / 2000

    def distrust(self) -> None:
        """After a failed round or batch: cached games may be behind their logs (another
        engine may have taken a partition over while this one could not renew its lease),
        and entries read but not handled sit in this consumer's pending list. Drop every
        cached game and handle every held partition's pending entries again first."""
        self.stats["round_errors"] += 1
        self.games.clear()
        self.fresh |= self.held

    def distrust_partition(self, p: int) -> None:
        """:meth:`distrust`, for partition ``p`` alone (a batch or a step of ``p``'s
        failed: the others' games are as good as before)."""
        self.stats["round_errors"] += 1
        self.cache.forget(p)
        if p in self.held:
            self.fresh.add(p)

    async def follow(self) -> None:
        """Make the subscribers match the held partitions: a partition lost stops its
        subscriber; a fresh one has its pending entries handled (all of them: their
        consumer is gone or distrusted), then its subscriber reads on. Each partition's
        steps run in order, the partitions side by side (:data:`FOLLOW_AT_ONCE` at a
        time): after a master's failover an engine wins back 10 to 21 partitions at once,
        and followed one after the other (a group, an ``XAUTOCLAIM`` and a subscriber's
        start each, several round trips) the last one's games waited 0.3 to 2.4 s more for
        their first move (issue 25)."""
        for stream in self.consumer.streams:
            if self._streams[stream] not in self.held:
                await self.consumer.unsubscribe(stream)
        gate = asyncio.Semaphore(FOLLOW_AT_ONCE)
        await asyncio.gather(*(self._follow_fresh(p, gate) for p in sorted(self.fresh)))

    async def _follow_fresh(self, p: int, gate: asyncio.Semaphore) -> None:
        """:meth:`follow`'s steps for the fresh partition ``p``."""
        async with gate:
            if p not in self.held:
                self.fresh.discard(p)
                return
            stream = self.keys.commands(p)
            async with self._alone(p):
                await ensure_group(self.redis, stream, GROUP)  # missing if made in a fault
                await self.consumer.reclaim(stream, 0, self._holds(p), self._settled(p))
                if p in self.held:
                    await self.consumer.subscribe(stream)

    @asynccontextmanager
    async def _alone(self, p: int) -> AsyncIterator[None]:
        """A step of partition ``p`` whose failure (its shard refusing writes, say) is
        ``p``'s alone: logged, ``p``'s cached games dropped and its pending entries handled
        again first next round, while the other partitions go on."""
        try:
            yield
        except Exception as error:
            log_fault(log, "partition round failed", error, partition=p)
            self.distrust_partition(p)

    def _holds(self, p: int) -> Callable[[], bool]:
        """Whether a reclaim of ``p`` goes on: ``p`` held and not fresh again. A lease lost
        and won again (or a failed batch) while the reclaim runs makes ``p`` fresh: its
        batches are left pending by :meth:`handle`, and the reclaim, going on while ``p``
        was held, claimed the same batch again from the start, each claim a delivery more,
        until the whole batch was dead-lettered (test_failover's SIGKILL test under load: 20
        entries of two partitions dead-lettered, their games never finished). It stops, and
        the next round's follow reclaims ``p`` again."""
        return lambda: self._current(p)

    def _settled(self, p: int) -> Callable[[], None]:
        """``p`` is no longer fresh, from when its reclaim holds its subscriber off. Earlier,
        a batch the subscriber read after entries left pending while ``p`` was fresh (a
        lease lost and won again, a failed batch) would be handled before them: a game's
        moves before its creation. A failure while reclaiming makes it fresh again."""
        return lambda: self.fresh.discard(p)

    async def reclaim(self) -> None:
        """Take over entries idle in held partitions (their handler crashed); which ones
        have any is asked of all in one round trip first. A partition whose lease goes
        meanwhile is left alone: its entries, which this engine no longer handles, would be
        claimed again and again until dead-lettered. So is a fresh one: :meth:`follow`
        reclaims it and then subscribes to it. (Reclaimed here, a partition won while the
        round's follow ran was called settled, never subscribed to: held, never read.)"""
        await self.consumer.revive()
        settled = [p for p in sorted(self.held) if p not in self.fresh]
        streams = [self.keys.commands(p) for p in settled]
        stale = set(await self.consumer.with_idle(streams, self.settings.claim_idle_ms))
        for p in settled:
            stream = self.keys.commands(p)
            if stream not in stale or p in self.fresh:
                continue  # nothing idle that long: no XAUTOCLAIM round trip for it
            async with self._alone(p):
                idle = self.settings.claim_idle_ms
                await self.consumer.reclaim(stream, idle, self._holds(p), self._settled(p))

    async def _on_batch(self, deliveries: list[Delivery]) -> None:
        """A subscriber's batch: handled; a failure leaves it pending and is distrusted."""
        try:
            await self.handle(deliveries)
        except Exception as error:
            log_fault(log, "engine batch failed; it stays pending and is reclaimed", error)
            for p in {self._streams[d.stream] for d in deliveries}:
                self.distrust_partition(p)

    # --- leases ----------------------------------------------------------------------------

    async def _begin(self) -> None:
        """:meth:`start` and a first share of the partitions."""
        await self.start()
        await self.rebalance()

    async def rebalance(self) -> None:
        """Heartbeat, renew held leases, then hold a fair share of the partitions."""
        await self.leases.rebalance()

    async def release_all(self) -> None:
        await self.leases.release_all()

    def _drop(self, p: int) -> None:
        """The lease on ``p`` is gone: another engine writes its games from now on."""
        self.leases.held.discard(p)
        self.fresh.discard(p)
        self.cache.forget(p)

    def _won(self, p: int) -> None:
        """The lease on ``p`` is won: its games, if cached while it was not held, are behind
        their logs; its pending entries are handled first."""
        self.cache.forget(p)
        self.fresh.add(p)

    # --- commands --------------------------------------------------------------------------

    async def handle(self, deliveries: Sequence[Delivery], attempt: int = 0) -> None:
        """Decide every delivery in order, then write the whole batch in one round trip.

        Deliveries of partitions no longer held (the lease went while the batch was read)
        are left pending, neither handled nor acknowledged: the new owner reclaims them, and
        handling them here would cache games this engine no longer writes. So are those of
        a fresh partition (its subscriber read again after a failure before the partition's
        pending entries were handled): the reclaim that comes next handles them after the
        older ones, in order."""
        streams = self._streams  # each stream asked once, not each delivery
        current = {s for s in {d.stream for d in deliveries} if self._current(streams[s])}
        deliveries = [d for d in deliveries if d.stream in current]
        outcomes: list[tuple[Delivery, str | None, Append | Finish]] = []
        parsed = self._parsed(deliveries)
        now = datetime.now(UTC).isoformat()
        traced = tracing.on()
        decide_now = self.decider.decide_now
        await self.cache.prefetch([env for _, env in parsed if isinstance(env, CommandEnvelope)])
        away: set[int] = set()  # partitions whose decision met their shard away
        for d, env in parsed:
            if away and streams[d.stream] in away:
                continue  # after its partition's failed decision: pending, in order
            if isinstance(env, Finish):
                outcomes.append((d, None, env))
                continue
            try:
                if traced:
                    with tracing.command_span(env.game_id, env.command_id, env.type, env.seat):
                        game_id, outcome = await self.decider.decide(d, env, now)
                else:  # a cached game's command is decided without a coroutine of its own
                    decided = decide_now(d, env, now) or await self.decider.decide(d, env, now)
                    game_id, outcome = decided
            except Exception as error:
                if transient(error):
                    # Its shard away (a master killed between the read and the decision):
                    # its partition's entries stay pending, the partition distrusted,
                    # handled again at the next round's follow. Taken for a crash, it
                    # waited for the idle claim: a table's start answered 16.6 s after a
                    # master kill, its shard writable after 4 (issue 25). The batch's
                    # other partitions go on (:meth:`_without_away`).
                    away.add(streams[d.stream])
                    log_fault(log, "a decision met its shard away: tried again later", error)
                    continue
                # A crash: leave the entry pending; it is reclaimed and retried, and after
                # too many deliveries it goes to the dead letters. The line names the command
                # (not bound to the context per command: that was 2% of the engine's CPU).
                log.exception(
                    "command crashed its handler",
                    entry=d.id,
                    stream=d.stream,
                    game=env.game_id,
                    command=env.command_id,
                    seat=env.seat,
                )
                self.stats["crashed"] += 1
                continue
            outcomes.append((d, game_id, outcome))
        if away:
            outcomes = self._without_away(outcomes, away)

        appends = [o for _, _, o in outcomes if isinstance(o, Append)]
        attach(appends, self.cache, self.settings, self.codec)
        hold_ends(self.cache, appends, [o for _, _, o in outcomes if isinstance(o, Finish)])
        started = time.perf_counter()
        results = await self.store.append_many(appends)
        if appends:
            metrics.APPEND_SECONDS.observe(time.perf_counter() - started)
        unanswered = len(results) - sum(map(_answered, results))
        if unanswered:
            self.stats["unreplicated"] += unanswered
            log.warning("appends not on enough replicas in time: unanswered", count=unanswered)
        finishes: list[tuple[int, Delivery, Finish]]
        retry: list[tuple[int, Delivery]] = []
        if set(map(_status, results)) <= {"ok"}:  # every append made (nearly every batch)
            accepted: list[Append] = appends
            finishes = (
                []
                if len(appends) == len(outcomes)
                else [(i, d, o) for i, (d, _, o) in enumerate(outcomes) if isinstance(o, Finish)]
            )
        else:
            finishes, retry, accepted = self._sorted_out(outcomes, appends, results)
        self.stats["accepted"] += len(accepted)
        metrics.count_commands("accepted", n=len(accepted))
        count_by_game(self.cache, accepted)
        stale = await record_finishes(self.store, self.cache, finishes)
        retry += stale
        again = {i for i, _ in stale}
        recorded = [f for i, _, f in finishes if i not in again]
        await record_final_hashes(self.store, self.cache, appends, results, recorded)
        if retry:
            self.stats["conflicts"] += len(retry)
            if attempt < 3:
                await self.handle([d for _, d in sorted(retry, key=lambda r: r[0])], attempt + 1)
            else:
                log.warning("giving up on a batch for now", entries=len(retry))

    def _parsed(
        self, deliveries: list[Delivery]
    ) -> list[tuple[Delivery, CommandEnvelope]] | list[tuple[Delivery, CommandEnvelope | Finish]]:
        """Each delivery with its command, or the refusal of a malformed one. Every body
        is validated in one pass of C calls (no Python frame per command); a batch with a
        malformed one is parsed again one by one, each refused alone."""
        try:
            envs = list(map(read_command, map(_body, map(_fields, deliveries))))
        except (ValidationError, KeyError):
            return [(d, self.decider.parse(d)) for d in deliveries]
        return list(zip(deliveries, envs, strict=True))

    def _sorted_out(
        self,
        outcomes: list[tuple[Delivery, str | None, Append | Finish]],
        appends: list[Append],
        results: list[AppendResult],
    ) -> tuple[list[tuple[int, Delivery, Finish]], list[tuple[int, Delivery]], list[Append]]:
        """A batch some of whose appends were not made: the outcomes to record, the entries
        to decide again (from each game's first append not made on: decided on a stale
        state, to decide again after reloading) and the appends accepted. The outcomes of a
        shard that refused an append are neither (:meth:`_without_failed_shards`)."""
        status = {id(a): r for a, r in zip(appends, results, strict=True)}
        outcomes = self._without_failed_shards(outcomes, status)
        failed: dict[str, int] = {}  # game -> position of its first failed append
        for i, (_, game_id, o) in enumerate(outcomes):
            if isinstance(o, Append) and status[id(o)].status != "ok" and game_id:
                failed.setdefault(game_id, i)
                self.games.pop(game_id, None)

        finishes: list[tuple[int, Delivery, Finish]] = []
        retry: list[tuple[int, Delivery]] = []
        accepted: list[Append] = []
        for i, (d, game_id, o) in enumerate(outcomes):
            if game_id in failed and i >= failed[game_id]:
                retry.append((i, d))
            elif isinstance(o, Finish):
                finishes.append((i, d, o))
            elif isinstance(o, Append):
                accepted.append(o)
        return finishes, retry, accepted

    def _without_away(
        self, outcomes: list[tuple[Delivery, str | None, Append | Finish]], away: set[int]
    ) -> list[tuple[Delivery, str | None, Append | Finish]]:
        """The outcomes but those of the partitions in ``away`` (a decision there met its
        shard away): those partitions are distrusted, their entries left pending (decided before
        the failure too: they go again in order). A failed decision failed the whole batch
        before, and the engine handles every partition's batches together (``Coalesced``):
        a kill's first moments distrusted the healthy partitions of such a round too, their
        games dropped from the cache and their entries reclaimed (issue 25)."""
        for p in away:
            self.distrust_partition(p)
        return [x for x in outcomes if self._streams[x[0].stream] not in away]

    def _without_failed_shards(
        self,
        outcomes: list[tuple[Delivery, str | None, Append | Finish]],
        status: dict[int, AppendResult],
    ) -> list[tuple[Delivery, str | None, Append | Finish]]:
        """The outcomes of the partitions whose appends all went through. A partition whose
        shard refused one (NOREPLICAS, a failover) is left alone, its entries pending: they
        are handled again, in order, once its shard takes writes; the other partitions of
        the batch carry on."""
        down = {
            self._streams[d.stream]
            for d, _, o in outcomes
            if isinstance(o, Append) and status[id(o)].status == "failed"
        }
        if not down:
            return outcomes
        log.warning("appends refused by their shard: tried again later", partitions=sorted(down))
        for p in down:
            self.distrust_partition(p)
        return [x for x in outcomes if self._streams[x[0].stream] not in down]

    def _current(self, p: int) -> bool:
        """Commands of partition ``p`` are handled now: it is held, and not fresh."""
        return p in self.held and p not in self.fresh
