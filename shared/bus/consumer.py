"""Reading partition streams through consumer groups, without losing anything.

- Groups are created explicitly from the start of the stream (id ``0``), so a group made
  after events were written still sees them all (``$`` would skip them).
- ``read`` takes new entries (``>``) of many streams in one call, in stream order.
- ``reclaim`` takes over entries another consumer left pending for longer than an idle
  threshold (``XAUTOCLAIM``); an entry delivered ``max_deliveries`` times goes to its
  partition's dead-letter stream with the reason instead of looping for ever.

Redis never redelivers a pending entry by itself (nor does FastStream's ``nack``): an entry
is retried only when a live consumer reclaims it.
"""

from __future__ import annotations

import json
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from redis.asyncio import Redis
from redis.exceptions import ResponseError

from .keys import Keys


async def ensure_group(redis: Redis, stream: str, group: str) -> None:
    """Create ``group`` on ``stream`` from its very first entry (idempotent)."""
    try:
        await redis.xgroup_create(stream, group, id="0", mkstream=True)
    except ResponseError as e:
        if "BUSYGROUP" not in str(e):
            raise


@dataclass(frozen=True)
class Delivery:
    stream: str
    id: str
    fields: dict[bytes, bytes]


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


class GroupReader:
    """One consumer of one group over any number of streams."""

    def __init__(
        self,
        redis: Redis,
        group: str,
        consumer: str,
        keys: Keys,
        max_deliveries: int = 5,
    ) -> None:
        self.redis = redis
        self.group = group
        self.consumer = consumer
        self.keys = keys  # names the dead-letter stream of each partition
        self.max_deliveries = max_deliveries
        self._next_claim = 0.0  # when next_batch next takes over idle pending entries

    async def read(
        self, streams: Sequence[str], count: int, block_ms: int | None
    ) -> list[Delivery]:
        """New entries of ``streams`` for this consumer (blocking up to ``block_ms``)."""
        if not streams:
            return []
        raw: Any = await self._in_group(
            streams,
            lambda: self.redis.xreadgroup(
                self.group, self.consumer, dict.fromkeys(streams, ">"), count=count, block=block_ms
            ),
        )
        return [
            Delivery(_text(stream), _text(entry_id), fields)
            for stream, entries in raw or []
            for entry_id, fields in entries
            if fields is not None
        ]

    async def _in_group(self, streams: Sequence[str], call: Callable[[], Awaitable[Any]]) -> Any:
        """``call()``; if a stream has lost its group (a Redis restarted without its data
        has none), make the groups again, from the start of the streams, and call again,
        instead of failing every round until a restart."""
        try:
            return await call()
        except ResponseError as e:
            if "NOGROUP" not in str(e):
                raise
        for stream in streams:
            await ensure_group(self.redis, stream, self.group)
        return await call()

    async def reclaim(self, stream: str, min_idle_ms: int, count: int) -> list[Delivery]:
        """Take over entries pending longer than ``min_idle_ms`` (XAUTOCLAIM); dead-letter
        the ones delivered too often. Returns the entries to handle again, in order."""
        reply: Any = await self._in_group(
            [stream],
            lambda: self.redis.xautoclaim(
                stream, self.group, self.consumer, min_idle_ms, start_id="0-0", count=count
            ),
        )
        claimed = [(_text(i), f) for i, f in reply[1] if f is not None]
        if not claimed:
            return []
        pending: Any = await self.redis.xpending_range(
            stream,
            self.group,
            min=claimed[0][0],
            max=claimed[-1][0],
            count=len(claimed) + 64,
            consumername=self.consumer,
        )
        times = {_text(p["message_id"]): p["times_delivered"] for p in pending}
        out = []
        for entry_id, fields in claimed:
            delivery = Delivery(stream, entry_id, fields)
            delivered = times.get(entry_id, 1)
            if delivered > self.max_deliveries:
                await self.dead_letter(delivery, f"delivered {delivered} times without success")
            else:
                out.append(delivery)
        return out

    async def next_batch(
        self, streams: Sequence[str], count: int, block_ms: int | None, claim_idle_ms: int
    ) -> list[Delivery]:
        """New entries of ``streams``; but every ``claim_idle_ms`` / 2, first the entries
        other consumers of the group left pending that long (they died, or could not handle
        them), so a live consumer handles them again."""
        now = time.monotonic()
        if now >= self._next_claim:
            self._next_claim = now + claim_idle_ms / 2000
            reclaimed: list[Delivery] = []
            for stream in streams:
                reclaimed += await self.reclaim(stream, claim_idle_ms, count)
            if reclaimed:
                return reclaimed
        return await self.read(streams, count, block_ms)

    async def dead_letter(self, delivery: Delivery, reason: str) -> None:
        """Move an entry to its partition's dead-letter stream (with why) and acknowledge
        it, in one transaction (one slot: the stream's)."""
        record: dict[Any, Any] = {
            "stream": delivery.stream,
            "id": delivery.id,
            "group": self.group,
            "reason": reason,
            "fields": json.dumps({_text(k): _text(v) for k, v in delivery.fields.items()}),
        }
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.xadd(self.keys.dead_letters(self.keys.partition_of(delivery.stream)), record)
            pipe.xack(delivery.stream, self.group, delivery.id)
            await pipe.execute()

    async def ack(self, stream: str, ids: Sequence[str]) -> None:
        if ids:
            await self.redis.xack(stream, self.group, *ids)
