"""Where streams end: the id of each one's newest entry, read in one round trip. What a
reader compares its checkpoints with to know it has caught up, and where a rebuild takes
its positions from."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from redis.asyncio import Redis

from shared.redis_replies import text

from .scripts import Library

EMPTY = "0-0"
"""The id before any entry: the tail of an empty or missing stream."""


async def newest_ids(redis: Redis, streams: Sequence[str]) -> dict[str, str]:
    """Each of ``streams``' newest entry id (:data:`EMPTY` for one with none), by stream,
    from one pipeline (not a transaction: a cluster takes it across slots)."""
    async with redis.pipeline(transaction=False) as pipe:
        for stream in streams:
            pipe.xrevrange(stream, count=1)
        tails: list[Any] = await pipe.execute()
    return {s: (text(t[0][0]) if t else EMPTY) for s, t in zip(streams, tails, strict=True)}


async def tails_that_answer(redis: Redis, streams: Sequence[str]) -> dict[str, str | Exception]:
    """Each stream's newest entry id (:data:`EMPTY` for one with none), or
    the error its shard answered (away, refusing): one pipeline for all, each shard's part
    on its own on a cluster, so the streams of the shards that answer are followed now."""
    async with redis.pipeline(transaction=False) as pipe:
        for stream in streams:
            pipe.xrevrange(stream, count=1)
        tails: list[Any] = await pipe.execute(raise_on_error=False)
    return {
        s: t if isinstance(t, Exception) else (text(t[0][0]) if t else EMPTY)
        for s, t in zip(streams, tails, strict=True)
    }


Entry = tuple[bytes, dict[bytes, bytes]]


async def newest_first(redis: Redis, stream: str, count: int) -> list[Entry]:
    """The stream's ``count`` newest entries, newest first (a look back over a stream
    outside any consumer: a socket's decision request due when it opens)."""
    entries: Any = await redis.xrevrange(stream, count=count)
    return [(entry_id, fields) for entry_id, fields in entries]


# A stream's entries after an id, counted in Redis (Redis 6.2 reports no group lag).
COUNTS = Library(
    "metrics",
    {
        # KEYS: 1 stream. ARGV: 1 an entry id, 2 at most this many. The entries after the id.
        "count_after": (
            "return #redis.call('XRANGE', KEYS[1], '(' .. ARGV[1], '+', 'COUNT', ARGV[2])"
        ),
    },
)
