"""Reading the heads of many sorted sets of deadlines at once (the bot player's loop reads
every partition's earliest deadline several times a second, busy or idle).

On one Redis the heads come from one script call: one reply to parse instead of a
pipeline of one ``ZRANGE`` per partition, whose packing, replies and redis-py callbacks
cost about 0.7 ms of CPU a round for 65 sets. On a cluster the sets live in their
partitions' slots, which one call cannot span: there it stays a pipeline (redis-py sends
each node its own), whose failures stay with their partitions.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from redis.asyncio import Redis
from redis.exceptions import ResponseError

from .connection import is_cluster
from .scripts import Library, call

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

SCRIPTS = Library("deadlines", {"heads": _HEADS})


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
