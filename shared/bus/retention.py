"""Trimming streams behind every reader, so Redis does not keep every entry for ever.

A stream entry may go once no reader can still need it:

- every consumer group has been delivered it (its ``last-delivered-id`` is at or past it,
  ``XINFO GROUPS``) and none holds it unacknowledged (the smallest id in the group's pending
  list, ``XPENDING``, is above it): a pending entry is still reclaimed and handled again;
- and it is older than the retention (``CARAVEL_STREAM_RETENTION_S``): readers without a
  group (the lobby's WebSocket fan-out, a person reading the rejections) read the recent
  past, and the retention is how far back they may fall.

A stream with no consumer group is trimmed by the retention alone: nothing says who reads
it. A reader that keeps its own position rather than a group (scoring keeps it in SQL)
publishes it with :func:`mark_read`, as a group that is never read through, so that its
entries wait for it like any group's. A group that skips streams it does not need (the
views projection, on partitions with no wanted game) moves itself forward on them with
:func:`advance_group`, so that its old position does not hold them. A group made after
entries were trimmed (a consumer started for the first time, later than the retention)
does not get them back: create the groups when a deployment starts, and rebuild a
projection that starts late.

One script per stream computes the point and trims (``XTRIM MINID``, exact) at once, so
no group moves or appears between the two.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from redis.asyncio import Redis

from shared.redis_replies import text as _text

from .scripts import STREAM_GROUPS_LUA, Batch, Library

_TRIM = (
    STREAM_GROUPS_LUA
    + """
-- KEYS: 1 stream. ARGV: 1 retention in ms.
-- Returns {the first id kept, the first id a group still needs ('' if no group), removed}.
if redis.call('EXISTS', KEYS[1]) == 0 then return {'0-0', '', 0} end
local now = redis.call('TIME')
-- An entry at least the retention old goes: with no retention, one made this millisecond too.
local point = {tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
               - tonumber(ARGV[1]) + 1, 0}
local floor = nil
for _, group in ipairs(groups(KEYS[1])) do
  local need = needs(KEYS[1], group)
  if floor == nil or less(need, floor) then floor = need end
end
if floor ~= nil and less(floor, point) then point = floor end
local removed = 0
if point[1] > 0 or point[2] > 0 then
  removed = redis.call('XTRIM', KEYS[1], 'MINID', text(point))
end
return {text(point), floor and text(floor) or '', removed}
"""
)

_MARK = """
-- KEYS: 1 stream. ARGV: 1 group, 2 the last id read.
local moved = redis.pcall('XGROUP', 'SETID', KEYS[1], ARGV[1], ARGV[2])
if type(moved) == 'table' and moved.err then
  redis.call('XGROUP', 'CREATE', KEYS[1], ARGV[1], ARGV[2], 'MKSTREAM')
end
return 1
"""


_ADVANCE = (
    STREAM_GROUPS_LUA
    + """
-- KEYS: 1 stream. ARGV: 1 group, 2 an id ('$': the stream's last entry), 3 '1' to also
-- acknowledge the group's entries pending below that id.
-- The group's position moves up to the id, never back; a missing group is left missing.
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
local to = ARGV[2]
if to == '$' then
  local last = redis.call('XREVRANGE', KEYS[1], '+', '-', 'COUNT', 1)[1]
  if last == nil then return 0 end
  to = last[1]
end
local group = group_named(KEYS[1], ARGV[1])
if group == nil then return 0 end
if less(parse(group['last-delivered-id']), parse(to)) then
  redis.call('XGROUP', 'SETID', KEYS[1], ARGV[1], to)
end
local acked = 0
if ARGV[3] == '1' and tonumber(group['pending']) > 0 then
  for _, entry in ipairs(redis.call('XPENDING', KEYS[1], ARGV[1], '-', '(' .. to, 1000)) do
    acked = acked + redis.call('XACK', KEYS[1], ARGV[1], entry[1])
  end
end
return acked
"""
)


SCRIPTS = Library("retention", {"trim": _TRIM, "mark": _MARK, "advance": _ADVANCE})


def stream_id(text: str) -> tuple[int, int]:
    """A stream entry id (``<ms>-<seq>``) as a pair that orders like the ids."""
    ms, _, seq = text.partition("-")
    return int(ms), int(seq or 0)


@dataclass(frozen=True)
class Trimmed:
    """One stream after trimming: entries below ``kept_from`` are gone; ``needed_from`` is
    the first entry some group has yet to handle (None: the stream has no group)."""

    stream: str
    kept_from: str
    needed_from: str | None
    removed: int

    def passed(self, entry_id: str) -> bool:
        """Every group has handled ``entry_id`` (true of any entry when there is no group)."""
        return self.needed_from is None or stream_id(entry_id) < stream_id(self.needed_from)


class Trimmer:
    """Trims streams behind their consumer groups, keeping ``retention_s`` of the recent past."""

    def __init__(self, redis: Redis, retention_s: float) -> None:
        self.redis = redis
        self.retention_ms = int(retention_s * 1000)

    async def trim(self, streams: Sequence[str]) -> list[Trimmed]:
        """Trim ``streams`` in one round trip (one script each: a cluster-safe pipeline when
        the streams share a slot, as one partition's do)."""
        async with Batch(self.redis) as batch:
            for stream in streams:
                batch.call(SCRIPTS["trim"], [stream], [self.retention_ms])
            replies: list[Any] = await batch.execute()
        return [
            Trimmed(stream, _text(kept), _text(needed) or None, int(removed))
            for stream, (kept, needed, removed) in zip(streams, replies, strict=True)
        ]


async def advance_group(
    redis: Redis, group: str, streams: Sequence[str], to: str, ack_below: bool = False
) -> dict[str, Exception]:
    """Move ``group``'s position on each of ``streams`` forward to ``to`` (an entry id, or
    ``$``: the stream's last entry), never back, in one round trip; with ``ack_below``, its
    entries pending below ``to`` are acknowledged too. For a group that skips what it does
    not need (the views projection, on partitions with no game wanted): its old position
    would otherwise keep those entries from being trimmed. A group another consumer reads
    ahead of ``to`` is left where it is. Returns the streams whose call failed, with the
    error (their shard away: a fault stays with its streams, the others are moved)."""
    if not streams:
        return {}
    async with Batch(redis) as batch:
        for stream in streams:
            batch.call(SCRIPTS["advance"], [stream], [group, to, "1" if ack_below else "0"])
        replies = await batch.execute(raise_on_error=False)
    return {
        stream: reply
        for stream, reply in zip(streams, replies, strict=True)
        if isinstance(reply, Exception)
    }


async def mark_read(redis: Redis, group: str, positions: Mapping[str, str]) -> None:
    """Publish how far a reader without a consumer group has read each stream (the id of
    the last entry it is done with), as ``group``'s position: the trimmer then keeps what
    it has not read. Call it after the position is saved where the reader keeps it, so the
    mark is never ahead of it."""
    if not positions:
        return
    async with Batch(redis) as batch:
        for stream, last_id in positions.items():
            batch.call(SCRIPTS["mark"], [stream], [group, last_id])
        await batch.execute()
