"""The heads of the partitions' deadlines, read at once (``shared.bus.deadlines``): the
same entries on one Redis (one script call) as on a cluster (a pipeline)."""

from __future__ import annotations

from redis.asyncio import Redis

from shared.bus import Keys
from shared.bus.deadlines import heads


async def test_heads_are_each_sets_first_entries_by_score(any_redis: Redis, keys: Keys) -> None:
    """Each set's earliest entry (none for an empty set), the last set's first ``n``."""
    sets = [keys.deadlines(p) for p in (0, 1, 2)] + [keys.legacy_deadlines()]
    await any_redis.zadd(sets[0], {"b": 20.5, "a": 10.25})
    await any_redis.zadd(sets[2], {"c": 3.0})
    await any_redis.zadd(sets[3], {"x": 3.0, "y": 1.0, "z": 2.0})
    assert await heads(any_redis, sets, 2) == [
        [(b"a", 10.25)],
        [],
        [(b"c", 3.0)],
        [(b"y", 1.0), (b"z", 2.0)],
    ]
