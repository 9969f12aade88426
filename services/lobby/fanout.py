"""One reader of the partition event and decision streams per lobby process, fanning
entries out to the WebSockets that follow each game: the events' notifications, and the
decision requests the engine adds with them (a seat's socket tells it its turn).

A blocking XREAD per WebSocket would hold a Redis connection per open socket and read
every other game's entries once per socket; the fan-out reads each stream once, through
one :class:`~shared.bus.Follower` of every partition event and decision stream (no consumer
group: every lobby process reads everything), while anyone listens; the last one to leave
stops it.

No gap: a listener is registered, and the subscribers' positions in every stream are fixed,
before :meth:`EventFanout.listen` returns; so an entry is either already in the game's log
when the listener reads it, or is delivered to the listener's queue afterwards (or both:
listeners skip versions they have already sent).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from redis.asyncio import Redis

from shared.bus import Broker, Delivery, Follower, Keys
from shared.contracts import DecisionRequest, Notification

BATCH = 500

Delivered = Notification | DecisionRequest


class EventFanout:
    def __init__(self, redis: Redis, keys: Keys, block_ms: int = 1000) -> None:
        self.redis = redis
        self.keys = keys
        self.block_ms = block_ms
        # Its subscribers (on a cluster, one per event and decision stream) read on a pool of
        # their own.
        self.broker = Broker(redis, readers=2 * keys.partitions, service="lobby")
        self._listeners: dict[str, set[asyncio.Queue[Delivered]]] = {}
        self._decisions = {keys.decisions(p) for p in keys.all_partitions()}
        self._follower: Follower | None = None
        self._starting = asyncio.Lock()

    @asynccontextmanager
    async def listen(self, game_id: str) -> AsyncIterator[asyncio.Queue[Delivered]]:
        """A queue of the game's notifications and decision requests appended from now on,
        while in the block. A request usually comes after the notification of its version
        (they are read by two subscribers: not always)."""
        queue: asyncio.Queue[Delivered] = asyncio.Queue()
        self._listeners.setdefault(game_id, set()).add(queue)
        try:
            await self._ensure_reading()
            yield queue
        finally:
            queues = self._listeners.get(game_id, set())
            queues.discard(queue)
            if not queues:
                self._listeners.pop(game_id, None)
            if not self._listeners:
                await self._stop_reading()

    async def close(self) -> None:
        """Stop reading (at shutdown, before the Redis client goes away)."""
        self._listeners.clear()
        await self._stop_reading()
        await self.broker.stop()  # its subscribers' own pool

    async def _ensure_reading(self) -> None:
        async with self._starting:
            if self._follower is not None:
                return
            events = [self.keys.events(p) for p in self.keys.all_partitions()]
            streams = events + sorted(self._decisions)
            async with self.redis.pipeline(transaction=False) as pipe:
                for stream in streams:
                    pipe.xrevrange(stream, count=1)
                tails: list[Any] = await pipe.execute()
            await self.broker.connect()
            follower = Follower(self.broker, self._deliver, batch=BATCH, block_ms=self.block_ms)
            for stream, tail in zip(streams, tails, strict=True):
                await follower.add(stream, tail[0][0].decode() if tail else "0-0")
            self._follower = follower

    async def _stop_reading(self) -> None:
        async with self._starting:
            if self._listeners:
                return  # someone came back meanwhile
            follower, self._follower = self._follower, None
            if follower is not None:
                await follower.close()

    async def _deliver(self, deliveries: list[Delivery]) -> None:
        for d in deliveries:
            item: Delivered
            if d.stream in self._decisions:
                item = DecisionRequest.model_validate_json(d.fields[b"r"])
            else:
                item = Notification.from_fields(d.fields)
            for queue in self._listeners.get(item.game_id, ()):
                queue.put_nowait(item)
