"""Plain reads of a stream's newest entries, outside any consumer: where a follower starts
(the newest entry's id, so it misses nothing written after it) and a look back over the
newest entries. Every such read of a bus stream lives here."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from redis.asyncio import Redis

Entry = tuple[bytes, dict[bytes, bytes]]
START = "0-0"  # an empty stream's position: every entry to come is after it


async def tails(redis: Redis, streams: Sequence[str]) -> list[str]:
    """The id of each stream's newest entry (``0-0`` for an empty one), in one round trip:
    a follower that starts after it reads everything written from now on."""
    async with redis.pipeline(transaction=False) as pipe:
        for stream in streams:
            pipe.xrevrange(stream, count=1)
        newest: list[Any] = await pipe.execute()
    return [entries[0][0].decode() if entries else START for entries in newest]


async def newest_first(redis: Redis, stream: str, count: int) -> list[Entry]:
    """The stream's ``count`` newest entries, newest first."""
    entries: Any = await redis.xrevrange(stream, count=count)
    return [(entry_id, fields) for entry_id, fields in entries]
