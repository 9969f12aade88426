"""The bot player's deadlines: reading the heads of many partitions' sorted sets at once
(its loop reads every partition's earliest deadline several times a second, busy or idle),
and setting humans' clocks with the acknowledgement of the requests that started them.

On one Redis the heads come from one script call: one reply to parse instead of a
pipeline of one ``ZRANGE`` per partition, whose packing, replies and redis-py callbacks
cost about 0.7 ms of CPU a round for 65 sets. On a cluster the sets live in their
partitions' slots, which one call cannot span: there it stays a pipeline (redis-py sends
each node its own), whose failures stay with their partitions.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from redis.asyncio import Redis
from redis.exceptions import ResponseError

from .connection import is_cluster
from .scripts import Batch, Library, call

_HEADS = """
-- Each sorted set's first entries with their scores, as ZRANGE key 0 n-1 WITHSCORES gives
-- them: n is 1, but ARGV[1] for the last key. KEYS: the sets. ARGV: 1 the last key's count
local out = {}
for i, key in ipairs(KEYS) do
  local last = 0
  if i == #KEYS then last = tonumber(ARGV[1]) - 1 end
  out[i] = redis.call('ZRANGE', key, 0, last, 'WITHSCORES')
end
return out
"""

_SET_AND_ACK = """
-- Deadlines set, then stream entries acknowledged, partition by partition: an entry is
-- never acknowledged without its deadline (a refused ZADD, out of memory say, ends the
-- call before its XACK). KEYS: per partition, its deadlines and its stream. ARGV: 1 the
-- group; then per partition the number of members m and of entry ids n, m (score, member)
-- pairs and the n ids.
local a = 2
for i = 1, #KEYS, 2 do
  local m, n = tonumber(ARGV[a]), tonumber(ARGV[a + 1])
  a = a + 2
  if m > 0 then redis.call('ZADD', KEYS[i], unpack(ARGV, a, a + 2 * m - 1)) end
  a = a + 2 * m
  if n > 0 then redis.call('XACK', KEYS[i + 1], ARGV[1], unpack(ARGV, a, a + n - 1)) end
  a = a + n
end
return 1
"""

SCRIPTS = Library("deadlines", {"heads": _HEADS, "set_and_ack": _SET_AND_ACK})


async def heads(redis: Redis, keys: Sequence[str], last_count: int) -> list[Any]:
    """For each key, its first entry as ``[(member, score)]`` (``[]``: empty), the last
    key's first ``last_count``; an error reply in place of a set that could not be read
    (a pipeline's that does not raise). A connection lost is raised."""
    if not is_cluster(redis):
        try:
            raw: list[Any] = await call(redis, SCRIPTS["heads"], keys, [last_count])
        except ResponseError as e:  # the server refuses (busy, loading): as each ZRANGE would
            return [e] * len(keys)
        return [[(entry[j], float(entry[j + 1])) for j in range(0, len(entry), 2)] for entry in raw]
    async with redis.pipeline(transaction=False) as pipe:
        for key in keys[:-1]:
            pipe.zrange(key, 0, 0, withscores=True)
        pipe.zrange(keys[-1], 0, last_count - 1, withscores=True)
        replies: list[Any] = await pipe.execute(raise_on_error=False)
    return replies


async def set_and_ack(
    redis: Redis,
    group: str,
    partitions: Sequence[tuple[str, Mapping[str, float], str, Sequence[str]]],
) -> None:
    """For each partition's (deadlines key, {member: due}, stream, entry ids): set the
    deadlines, then acknowledge the entries, in one round trip for all (one call on one
    Redis; one per partition on a cluster, whose keys share its slot). Raises the first
    error: what was not done stays pending and is read again."""
    calls: list[tuple[list[str], list[Any]]] = []
    for deadlines, members, stream, ids in partitions:
        if not calls or is_cluster(redis):
            calls.append(([], [group]))
        keys, args = calls[-1]
        keys += (deadlines, stream)
        args += (len(members), len(ids))
        for member, due in members.items():
            args += (due, member)
        args += ids
    if not calls:
        return
    async with Batch(redis) as batch:
        for keys, args in calls:
            batch.call(SCRIPTS["set_and_ack"], keys, args)
        await batch.execute()
