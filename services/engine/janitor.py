"""Keeping Redis to live games: trimming the partition streams, archiving finished games.

The janitor runs beside the engine, in its process, and tends the partitions that engine
holds the lease of: one janitor per partition at a time, with no coordination of its own
(and were two to overlap while a lease moves, both steps are safe to repeat). Every round,
for each held partition, it

- trims the command, event, decision (the sockets' and the bot player's) and rejection
  streams behind every consumer group, keeping ``CARAVEL_STREAM_RETENTION_S`` of the recent
  past (``shared.bus.retention``);
- archives the finished games that ended ``CARAVEL_ARCHIVE_AFTER_S`` ago or more and whose
  last event every consumer group of the event stream has passed (``shared.eventstore.
  archive``: written to SQL, verified, then deleted from Redis).

A game whose archive does not verify stays in Redis, logged once, until the process
restarts: it is never deleted unverified.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable, Collection

import structlog
from redis.asyncio import Redis

from shared.bus import Keys
from shared.bus.retention import Trimmed, Trimmer
from shared.eventstore import Archive, ArchiveMismatch, EventStore, Finished, archive_game
from shared.loops import each, keep_running
from shared.settings import Settings

log = structlog.get_logger("caravel.janitor")

ROUND_S = 10.0  # between rounds: trimming is cheap, and archiving waits an hour anyway
ARCHIVE_PER_ROUND = 100  # games archived per partition and round, to keep rounds short


class Janitor:
    def __init__(
        self,
        redis: Redis,
        keys: Keys,
        settings: Settings,
        archive: Archive | None,
        held: Callable[[], Collection[int]],
    ) -> None:
        self.redis = redis
        self.keys = keys
        self.archive = archive
        self.held = held
        self.after_ms = int(settings.archive_after_s * 1000)
        self.store = EventStore(redis, keys, archive=archive)
        self.trimmer = Trimmer(redis, settings.stream_retention_s)
        self.stats: Counter[str] = Counter()
        self._refused: set[str] = set()  # archives that did not verify: kept in Redis

    async def run(self, stop: asyncio.Event) -> None:
        """A round every ``ROUND_S`` until ``stop``; a failed round is retried later."""
        await keep_running(stop, self.round, log, "janitor round failed", period_s=ROUND_S)

    async def round(self) -> None:
        """Tend every partition held now, each alone (one's failure stops no other)."""
        await each(sorted(self.held()), self.tend, log, "partition not tended")

    async def tend(self, p: int) -> None:
        """Trim partition ``p``'s streams, then archive its finished games that are due."""
        k = self.keys
        streams = [k.commands(p), k.events(p), k.decisions(p), k.rejections(p), k.bot_decisions(p)]
        trimmed = await self.trimmer.trim(streams)
        removed = sum(t.removed for t in trimmed)
        self.stats["trimmed"] += removed
        archived = await self.archive_due(p, trimmed[1]) if self.archive is not None else 0
        if removed or archived:
            log.info("tended partition", partition=p, trimmed=removed, archived=archived)

    async def archive_due(self, p: int, events: Trimmed) -> int:
        """Archive partition ``p``'s due finished games; returns how many left Redis."""
        assert self.archive is not None
        finished = await self.store.finished_games(p)
        if not finished:
            return 0  # most partitions most rounds: no clock to read
        await self.store.stamp_finished([f.game_id for f in finished if not _stamped(f)])
        now_ms = await self._now_ms()
        due = [f.game_id for f in finished if self._due(f, events, now_ms)]
        done = 0
        for game_id in due[:ARCHIVE_PER_ROUND]:
            try:
                archived = await archive_game(self.store, self.archive, game_id)
            except ArchiveMismatch:
                log.exception("archive does not verify: the game stays in Redis", game=game_id)
                self._refused.add(game_id)
                self.stats["refused"] += 1
                continue
            if archived is not None and archived.deleted:
                done += 1
                self.stats["archived"] += 1
        return done

    def _due(self, f: Finished, events: Trimmed, now_ms: int) -> bool:
        """Finished long enough ago, and every group of the event stream is past its end."""
        if f.finished_ms is None or f.final_entry is None or f.game_id in self._refused:
            return False
        return now_ms - f.finished_ms >= self.after_ms and events.passed(f.final_entry)

    async def _now_ms(self) -> int:
        """Redis's clock, the one that stamped the games' ends and the stream ids."""
        seconds, micros = await self.redis.time()
        return int(seconds) * 1000 + int(micros) // 1000


def _stamped(f: Finished) -> bool:
    return f.finished_ms is not None and f.final_entry is not None
