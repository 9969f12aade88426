"""One reader of the partition event and decision streams per lobby process, fanning
entries out to the WebSockets that follow each game: the events' notifications, and the
decision requests the engine adds with them (a seat's socket tells it its turn).

A blocking XREAD per WebSocket would hold a Redis connection per open socket and read
every other game's entries once per socket; one shared reader holds one connection and
reads each entry once. It runs while anyone listens and stops when the last one leaves.

No gap: a listener is registered, and the reader's position in every stream is fixed, before
:meth:`EventFanout.listen` returns; so an entry is either already in the game's log when the
listener reads it, or is delivered to the listener's queue afterwards (or both: listeners
skip versions they have already sent).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import structlog
from redis.asyncio import Redis
from redis.exceptions import RedisError

from shared.bus import Keys
from shared.contracts import DecisionRequest, Notification
from shared.loops import Backoff

log = structlog.get_logger("caravel.fanout")

Delivered = Notification | DecisionRequest


class EventFanout:
    def __init__(self, redis: Redis, keys: Keys, block_ms: int = 1000) -> None:
        self.redis = redis
        self.keys = keys
        self.block_ms = block_ms
        self._listeners: dict[str, set[asyncio.Queue[Delivered]]] = {}
        self._decisions = {keys.decisions(p) for p in keys.all_partitions()}
        self._positions: dict[str, bytes] = {}
        self._reader: asyncio.Task[None] | None = None
        self._starting = asyncio.Lock()

    @asynccontextmanager
    async def listen(self, game_id: str) -> AsyncIterator[asyncio.Queue[Delivered]]:
        """A queue of the game's notifications and decision requests appended from now on,
        while in the block. A request comes after the notification of its version, except
        when a read cuts the event stream short (then before it)."""
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

    async def close(self) -> None:
        """Stop reading (at shutdown, before the Redis client goes away)."""
        if self._reader is not None:
            self._reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reader

    async def _ensure_reading(self) -> None:
        async with self._starting:
            if self._reader is not None and not self._reader.done():
                return
            events = [self.keys.events(p) for p in self.keys.all_partitions()]
            streams = events + sorted(self._decisions)  # events first in each reply
            async with self.redis.pipeline(transaction=False) as pipe:
                for stream in streams:
                    pipe.xrevrange(stream, count=1)
                tails: list[Any] = await pipe.execute()
            self._positions = {
                s: (t[0][0] if t else b"0-0") for s, t in zip(streams, tails, strict=True)
            }
            self._reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        """Read every partition stream and hand each entry to its game's listeners; return
        once nobody listens (the next listener starts a fresh reader)."""
        backoff = Backoff()
        while self._listeners:
            try:
                reply: Any = await self.redis.xread(
                    self._positions,  # type: ignore[arg-type]
                    count=500,
                    block=self.block_ms,
                )
            except RedisError as e:
                delay = backoff.next_delay()
                log.warning("event fan-out read failed; retrying", error=str(e), retry_in_s=delay)
                await asyncio.sleep(delay)
                continue
            backoff.reset()
            for stream, entries in reply or []:
                name = stream.decode()
                for entry_id, fields in entries:
                    self._positions[name] = entry_id
                    self._deliver(name, fields)

    def _deliver(self, stream: str, fields: dict[bytes, bytes]) -> None:
        item: Delivered
        if stream in self._decisions:
            item = DecisionRequest.model_validate_json(fields[b"r"])
        else:
            item = Notification.from_fields(fields)
        for queue in self._listeners.get(item.game_id, ()):
            queue.put_nowait(item)
