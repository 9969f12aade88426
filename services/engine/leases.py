"""The engine's leases on the partitions: a heartbeat among the live engines, each holding a
fair share of the partitions through leases that expire unless renewed."""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable

import structlog
from redis.asyncio import Redis

from shared.bus import Keys
from shared.bus.connection import is_cluster, wait_or_remapped
from shared.bus.scripts import Batch, call
from shared.eventstore.scripts import LEASES as SCRIPTS

log = structlog.get_logger("caravel.engine")

# How often the leases a shard's fault dropped are tried again (:meth:`Leases.regain`),
# until won back or found taken: the full round comes every third of the lease's TTL
# (1.67 s by default), and after a failover the hit shard's games waited for it (issue 25).
REGAIN_S = 0.25


class Leases:
    """The partitions one engine holds. ``on_lost(p)`` is called when the lease on ``p``
    goes (another engine writes its games from now on), ``on_won(p)`` when it is won.

    A lease whose renewal its shard fails is dropped at once (its partition is not served
    on a lease this engine cannot vouch for); its key still names this engine, so the
    engine takes it again (``take``: free, or its own) at the first round its shard takes
    writes, not once the key has expired on the new master. (Rounds every 0.2 s while a
    shard failed were tried too: the hit shard moved ~0.4 s sooner, the other shards'
    events/s during a master kill fell from ~0.6 to ~0.45 of their quiet rate, each round
    sending the dead master a pipeline and its client's commands re-reading the slot map:
    taken out, benchmarks/README.md, branch `failover`.) Instead, the partitions a fault
    dropped alone are tried again every :data:`REGAIN_S` (:meth:`regain`): one small
    pipeline to their own shard, until won back or found taken by another engine."""

    def __init__(
        self,
        redis: Redis,
        keys: Keys,
        engine_id: str,
        ttl_ms: int,
        on_lost: Callable[[int], None],
        on_won: Callable[[int], None],
    ) -> None:
        self.redis, self.keys, self.id, self.ttl_ms = redis, keys, engine_id, ttl_ms
        self.on_lost, self.on_won = on_lost, on_won
        self.held: set[int] = set()
        self.live: list[str] = [engine_id]  # the live engines, as last seen
        self.dropped: set[int] = set()  # dropped by a fault: tried again by :meth:`regain`
        self._round = asyncio.Lock()  # a round and a regain never interleave

    async def rebalance(self) -> None:
        """Heartbeat, renew held leases, then hold a fair share of the partitions."""
        async with self._round:
            await self._rebalance()

    async def regain(self) -> None:
        """Take back the partitions a fault dropped (:attr:`dropped`) whose shard takes
        writes again, within this engine's share: their keys still name this engine, so
        ``take`` wins them at once. One taken by another engine meanwhile (its key expired),
        or over the share, is left to the full rounds; one whose shard still fails is tried
        again next time."""
        if not self.dropped:
            return
        async with self._round:
            share = math.ceil(self.keys.partitions / max(len(self.live), 1))
            tried = sorted(self.dropped - self.held)[: max(0, share - len(self.held))]
            self.dropped = set(tried)
            if not tried:
                return
            async with Batch(self.redis) as batch:
                for p in tried:
                    batch.call(SCRIPTS["take"], [self.keys.lease(p)], [self.id, self.ttl_ms])
                taken = await batch.execute(raise_on_error=False)
            for p, ok in zip(tried, taken, strict=True):
                if isinstance(ok, Exception):
                    continue
                self.dropped.discard(p)
                if ok == 1:
                    self.held.add(p)
                    self.on_won(p)
            won = [p for p in tried if p in self.held]
            if won:
                log.info("leases regained", engine=self.id, held=len(self.held), won=won)

    async def regain_and_wait(self) -> None:
        """:meth:`regain`, then a wait of :data:`REGAIN_S`, ended sooner when this process
        finds another master for some slots (``wait_or_remapped``: a re-read of the slot
        map or a MOVED after a failover, whose new master may be the one the dropped
        partitions wait for). The engines won the hit shard's leases back up to a whole
        wait after their map named its new master (issue 25, `failover11`)."""
        await self.regain()
        await wait_or_remapped(REGAIN_S)

    async def _rebalance(self) -> None:
        ttl = self.ttl_ms
        now_ms = int(time.time() * 1000)
        engines = self.keys.engines()
        async with Batch(self.redis) as batch:
            batch.pipe.zadd(engines, {self.id: now_ms + ttl})
            batch.pipe.zremrangebyscore(engines, "-inf", now_ms)
            batch.pipe.zrange(engines, 0, -1)
            held = sorted(self.held)
            one_call = bool(held) and not is_cluster(self.redis)
            if one_call:
                leases = [self.keys.lease(p) for p in held]
                batch.call(SCRIPTS["renew_many"], leases, [self.id, ttl])
            else:
                for p in held:
                    batch.call(SCRIPTS["renew"], [self.keys.lease(p)], [self.id, ttl])
            replies = await batch.execute(raise_on_error=False)
        renewals = replies[3:]
        if one_call:  # one reply for all: a failed call fails each of them
            many = renewals[0]
            renewals = [many] * len(held) if isinstance(many, Exception) else list(many)
        for p, renewed in zip(held, renewals, strict=True):
            if isinstance(renewed, Exception):  # its shard fails: the others carry on
                log.warning("lease not renewed", partition=p, error=repr(renewed))
                self.dropped.add(p)
            if not renewed or isinstance(renewed, Exception):
                self.on_lost(p)
        failed = next((r for r in replies[:3] if isinstance(r, Exception)), None)
        if failed is None:
            self.live = sorted(m.decode() if isinstance(m, bytes) else m for m in replies[2])
        else:  # the heartbeat's shard fails: share out as last seen, and carry on
            log.warning("engines' heartbeat not written", error=repr(failed))
        await self._take_share(ttl)

    async def _take_share(self, ttl: int) -> None:
        """Release the partitions over this engine's share, then try for the missing ones,
        starting where this engine's place among the live ones puts it."""
        live = self.live
        total = self.keys.partitions
        share = math.ceil(total / max(len(live), 1))
        for p in sorted(self.held, reverse=True)[: max(0, len(self.held) - share)]:
            await self.release(p)
            self.on_lost(p)
        need = share - len(self.held)
        if need <= 0:
            return
        start = (live.index(self.id) if self.id in live else 0) * share
        candidates = [(start + i) % total for i in range(total)]
        candidates = [p for p in candidates if p not in self.held]
        async with Batch(self.redis) as batch:
            for p in candidates:
                batch.call(SCRIPTS["take"], [self.keys.lease(p)], [self.id, ttl])
            taken = await batch.execute(raise_on_error=False)  # a failing shard: none won there
        won = [p for p, ok in zip(candidates, taken, strict=True) if ok == 1]
        for p in won[need:]:
            await self.release(p)
        for p in won[:need]:
            self.held.add(p)
            self.on_won(p)
        if won:
            log.info("leases", engine=self.id, held=len(self.held), live=len(live), won=won[:need])

    async def release(self, p: int) -> None:
        """Give up the lease on ``p`` (if this engine still has it)."""
        await call(self.redis, SCRIPTS["release"], [self.keys.lease(p)], [self.id])

    async def release_all(self) -> None:
        """Give up every lease and leave the live engines."""
        self.dropped.clear()
        for p in sorted(self.held):
            await self.release(p)
            self.on_lost(p)
        await self.redis.zrem(self.keys.engines(), self.id)
