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
"""

from __future__ import annotations

import asyncio
from typing import Any

import structlog
from prometheus_client import Counter, Gauge, Histogram
from redis.asyncio import Redis

from shared.bus import Keys
from shared.loops import keep_running

log = structlog.get_logger("caravel.metrics")

COMMANDS = Counter(
    "caravel_commands",
    "Commands the engine has finished, by status (accepted, duplicate, rejected) and, for a "
    "rejection, its code.",
    ["status", "code"],
)
APPEND_SECONDS = Histogram(
    "caravel_append_seconds",
    "Time to append one batch of commands' events (one pipelined round trip of atomic scripts).",
    buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5),
)
BOT_DECISION_SECONDS = Histogram(
    "caravel_bot_decision_seconds",
    "Time a bot took to choose a move, by level and by whom it played for (a bot seat, or a "
    "fallback for a human who left or ran out of time).",
    ["level", "actor"],
    buckets=(0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0),
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
    "Entries of a partition stream not yet delivered to a consumer group (XINFO GROUPS lag).",
    ["stream", "partition", "group"],
)
CONSUMER_PENDING = Gauge(
    "caravel_consumer_pending",
    "Entries delivered to a consumer group and not acknowledged yet.",
    ["stream", "partition", "group"],
)
DEAD_LETTERS = Gauge("caravel_dead_letters", "Entries in the dead-letter stream.")

SAMPLE_EVERY_S = 5.0


class RedisSampler:
    """Keeps the gauges that only Redis knows up to date, every ``every_s`` seconds."""

    def __init__(self, redis: Redis, keys: Keys, every_s: float = SAMPLE_EVERY_S) -> None:
        self.redis = redis
        self.keys = keys
        self.every_s = every_s

    async def run(self, stop: asyncio.Event) -> None:
        # Redis away for a moment: the gauges keep their last values.
        await keep_running(stop, self.sample, log, "sampling redis failed", period_s=self.every_s)

    async def sample(self) -> None:
        """Read every partition stream's groups, the registries of games and the dead
        letters in one round trip, then set the gauges (all at once, between two awaits,
        so a scrape never sees half a sample)."""
        k = self.keys
        streams = [
            (kind, p, key(p))
            for p in k.all_partitions()
            for kind, key in (
                ("commands", k.commands),
                ("events", k.events),
                ("decisions", k.decisions),
            )
        ]
        async with self.redis.pipeline(transaction=False) as pipe:
            for _, _, stream in streams:
                pipe.xinfo_groups(stream)
            for p in k.all_partitions():
                pipe.scard(k.games(p))
                pipe.scard(k.finished(p))
            pipe.xlen(k.dead_letters())
            replies: list[Any] = await pipe.execute(raise_on_error=False)
        groups, counts, dead = replies[: len(streams)], replies[len(streams) : -1], replies[-1]
        CONSUMER_LAG.clear()
        CONSUMER_PENDING.clear()
        for (kind, p, _), reply in zip(streams, groups, strict=True):
            if isinstance(reply, Exception):
                continue  # no such stream yet: nothing was ever sent to it
            for group in reply:
                labels = (kind, str(p), _text(group["name"]))
                CONSUMER_PENDING.labels(*labels).set(group["pending"])
                lag = group.get("lag")  # None after deletions; absent before Redis 7
                if lag is not None:
                    CONSUMER_LAG.labels(*labels).set(lag)
        GAMES_RUNNING.set(sum(counts[0::2]) - sum(counts[1::2]))
        DEAD_LETTERS.set(dead)


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value
