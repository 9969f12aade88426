"""The heads of the partitions' deadlines, read at once (``shared.bus.deadlines``): the
same entries on one Redis (one script call) as on a cluster (a pipeline)."""

from __future__ import annotations

from redis.asyncio import Redis

from shared.bus import Keys, ensure_group
from shared.bus.deadlines import heads, set_and_ack


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


async def test_clocks_are_set_with_the_acknowledgement_of_their_requests(
    any_redis: Redis, keys: Keys
) -> None:
    """Each partition's deadlines are set and its entries acknowledged in one call; the
    entries not named stay pending."""
    streams = [keys.decisions(p) for p in (0, 1)]
    ids = []
    for stream in streams:
        await ensure_group(any_redis, stream, "ai")
        ids.append([await any_redis.xadd(stream, {"r": str(i)}) for i in range(2)])
        await any_redis.xreadgroup("ai", "c", {stream: ">"})
    await set_and_ack(
        any_redis,
        "ai",
        [
            (keys.deadlines(0), {"m0": 5.5, "m1": 7.0}, streams[0], [ids[0][0]]),
            (keys.deadlines(1), {}, streams[1], ids[1]),
        ],
    )
    assert await any_redis.zrange(keys.deadlines(0), 0, -1, withscores=True) == [
        (b"m0", 5.5),
        (b"m1", 7.0),
    ]
    assert not await any_redis.exists(keys.deadlines(1))
    pending = await any_redis.xpending_range(streams[0], "ai", "-", "+", 10)
    assert [e["message_id"] for e in pending] == [ids[0][1]]
    assert (await any_redis.xpending(streams[1], "ai"))["pending"] == 0
