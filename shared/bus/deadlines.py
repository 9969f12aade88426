"""The bot player's deadlines: reading the heads of many partitions' sorted sets at once
(its loop reads every partition's earliest deadline several times a second, busy or idle),
setting humans' clocks with the acknowledgement of the requests that started them, and
handing a group's unread entries over to another stream (:func:`hand_over`), and the
wake-ups that let its loop sleep while no deadline can be due (:class:`Wakes`).

On one Redis the heads come from one script call: one reply to parse instead of a
pipeline of one ``ZRANGE`` per partition, whose packing, replies and redis-py callbacks
cost about 0.7 ms of CPU a round for 65 sets. On a cluster the sets live in their
partitions' slots, which one call cannot span: there it stays a pipeline (redis-py sends
each node its own), whose failures stay with their partitions.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping, Sequence
from typing import Any

import structlog
from redis.asyncio import Redis
from redis.exceptions import ResponseError

from .connection import is_cluster
from .scripts import STREAM_GROUPS_LUA, Batch, Library, call

log = structlog.get_logger("caravel.deadlines")

LISTEN_RETRY_S = 1.0  # a subscription lost (Redis away) is made again this often
# The bot player's deadlines loop reads every set's head at least this often, woken or not
# (``services.ai``). A deadline due later than a read to come sleeps no loop past it: its
# writer publishes no wake-up for it, and so need not read the set's earliest to tell
# (:func:`wake_horizon`).
LONGEST_WAIT_S = 1.0


def wake_horizon(now: float) -> float:
    """The due time (Unix) from which a deadline written at ``now`` needs no wake-up: the
    bot player reads the sets again before then, with a second to spare for the clocks of
    two hosts. The engine's append reads a set's earliest, to wake the loop if the new
    deadline is sooner, only for a deadline due before it (a human's clock is usually a
    minute: one ``ZRANGE`` less on nearly every human move, issue 24)."""
    return now + 2 * LONGEST_WAIT_S


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

_HAND_OVER = (
    STREAM_GROUPS_LUA
    + """
-- The entries a consumer group has not handled on a stream (pending, or past its position)
-- copied to another stream (field ARGV[2] only), then the group destroyed: a group that
-- reads a stream no more, whose position would otherwise hold the stream's entries from
-- being trimmed. Entries handled already may be copied again (between the first pending
-- and the position): their readers take them twice. Returns the entries copied (-1: no
-- such group). KEYS: 1 the old stream, 2 the new. ARGV: 1 group, 2 field.
if redis.call('EXISTS', KEYS[1]) == 0 then return -1 end
local group = group_named(KEYS[1], ARGV[1])
if group == nil then return -1 end
local copied = 0
for _, entry in ipairs(redis.call('XRANGE', KEYS[1], text(needs(KEYS[1], group)), '+')) do
  local f = entry[2]
  for i = 1, #f, 2 do
    if f[i] == ARGV[2] then
      redis.call('XADD', KEYS[2], '*', ARGV[2], f[i + 1])
      copied = copied + 1
    end
  end
end
redis.call('XGROUP', 'DESTROY', KEYS[1], ARGV[1])
return copied
"""
)

SCRIPTS = Library(
    "deadlines", {"heads": _HEADS, "set_and_ack": _SET_AND_ACK, "hand_over": _HAND_OVER}
)


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


async def hand_over(
    redis: Redis, group: str, field: str, streams: Sequence[tuple[str, str]]
) -> tuple[int, list[tuple[str, str]]]:
    """For each (old stream, new stream): what ``group`` had not handled on the old one
    copied to the new one, and the group removed from the old one (one call per pair,
    atomic, in one round trip; a stream without the group is left as it is). The bot
    player's requests moved to streams of their own: its group on the streams of every
    request, read no more, would otherwise keep them from being trimmed, and the requests
    it had not answered would be lost. Returns how many entries were copied, and the pairs
    whose call failed (their shard refusing writes, say: nothing done there, to try again).
    A connection lost is raised."""
    if not streams:
        return 0, []
    async with Batch(redis) as batch:
        for old, new in streams:
            batch.call(SCRIPTS["hand_over"], [old, new], [group, field])
        replies: list[Any] = await batch.execute(raise_on_error=False)
    failed = [pair for pair, r in zip(streams, replies, strict=True) if isinstance(r, Exception)]
    copied = sum(max(0, int(r)) for r in replies if not isinstance(r, Exception))
    return copied, failed


async def due_now(redis: Redis, key: str, member: str) -> None:
    """Make ``member`` due now among the deadlines ``key`` (a leaver's decision), and wake
    the bot players' loops (:class:`Wakes`), in one round trip."""
    async with redis.pipeline(transaction=False) as pipe:
        pipe.zadd(key, {member: 0})
        pipe.publish(key, "")
        await pipe.execute()


class Wakes:
    """What wakes the bot player's deadlines loop before the time it planned to read them
    again: a deadline written earlier than its set's earliest, which its writer publishes
    on the set's own name as channel (the engine's append script for a human's clock,
    :func:`due_now` for a leaver's seat), and the player's own writes (:meth:`wake`). The
    loop reads every set's head (:func:`heads`) and sleeps until the nearest: a new
    deadline that is not its set's earliest is due no sooner than what the loop waits for
    already. While not subscribed (a cluster, whose client has no subscriptions here, or
    Redis away) :attr:`listening` is False: the caller reads again at short intervals."""

    def __init__(self, redis: Redis, keys: Sequence[str]) -> None:
        self.redis, self.keys = redis, list(keys)
        self.listening = False
        self._woken = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        if self._task is None and not is_cluster(self.redis):
            self._task = asyncio.create_task(self._listen(), name="deadline wakes")

    def wake(self) -> None:
        self._woken.set()

    def clear(self) -> None:
        """Forget the wake-ups so far: called before the heads are read, so that one
        published during the read wakes the next wait."""
        self._woken.clear()

    async def wait(self, seconds: float) -> None:
        """Until woken, or ``seconds`` passed."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._woken.wait(), seconds)

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None
        self.listening = False

    async def _listen(self) -> None:
        """Subscribe to every set's channel and wake at each message; a subscription lost
        is made again, and wakes the loop (what was published meanwhile is lost)."""
        while True:
            pubsub = self.redis.pubsub(ignore_subscribe_messages=True)
            try:
                await pubsub.subscribe(*self.keys)
                self.listening = True
                self.wake()
                while True:
                    if await pubsub.get_message(timeout=LISTEN_RETRY_S) is not None:
                        self.wake()
            except Exception as e:
                if self.listening:
                    log.warning("deadline wake-ups lost", error=repr(e))
                self.listening = False
                self.wake()
            finally:
                with contextlib.suppress(Exception):
                    await pubsub.aclose()  # type: ignore[no-untyped-call]
            await asyncio.sleep(LISTEN_RETRY_S)
