"""The heads of the partitions' deadlines, read at once (``shared.bus.deadlines``): the
same entries on one Redis (one script call) as on a cluster (a pipeline)."""

from __future__ import annotations

from redis.asyncio import Redis

from shared.bus import Keys, ensure_group
from shared.bus.deadlines import hand_over, heads, set_and_ack


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


async def test_a_groups_unhandled_entries_are_handed_over_and_the_group_removed(
    any_redis: Redis, keys: Keys
) -> None:
    """Of four entries, the group acknowledged the first, holds the second pending and has
    not read the last two: those three are copied to the new stream (their ``r`` field),
    the group leaves the old stream, and a second call finds no group and copies nothing.
    Another group on the old stream stays."""
    old, new = keys.decisions(0), keys.bot_decisions(0)
    await ensure_group(any_redis, old, "ai")
    await ensure_group(any_redis, old, "other")
    ids = [await any_redis.xadd(old, {"r": f"q{i}", "x": "-"}) for i in range(4)]
    await any_redis.xreadgroup("ai", "c", {old: ">"}, count=2)
    await any_redis.xack(old, "ai", ids[0])
    pairs = [(old, new), (keys.decisions(1), keys.bot_decisions(1))]
    assert await hand_over(any_redis, "ai", "r", pairs) == (3, [])
    copied = await any_redis.xrange(new)
    assert [fields for _, fields in copied] == [{b"r": b"q1"}, {b"r": b"q2"}, {b"r": b"q3"}]
    groups = await any_redis.xinfo_groups(old)
    assert [g["name"] for g in groups] == [b"other"]
    assert await hand_over(any_redis, "ai", "r", [(old, new)]) == (0, [])
    assert await any_redis.xlen(new) == 3
