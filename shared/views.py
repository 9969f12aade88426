"""The views projection's documents: a game's projected view for a seat or a spectator.

The lobby's views projector writes them (``Keys.view``: the version, the spectator view, and
per seat its part: how the seat's own view differs from the spectator's); the HTTP API and
the bot player read them here, without replaying a log. Storing the difference rather than
each seat's whole view keeps a game's views about as small as one view, whatever the game:
a seat usually sees a little more (its legal commands, its hand), rarely something else.
"""

from __future__ import annotations

import json
import time
from typing import Any

from redis.asyncio import Redis

from shared.bus import Keys


def seat_part(public: dict[str, Any], seat_view: dict[str, Any]) -> dict[str, Any]:
    """What a seat's view changes in the spectator's: the top-level fields it sets (new or
    different) and those it drops."""
    part: dict[str, Any] = {
        "set": {k: v for k, v in seat_view.items() if k not in public or public[k] != v}
    }
    dropped = [k for k in public if k not in seat_view]
    if dropped:
        part["unset"] = dropped
    return part


async def read_view(
    redis: Redis, keys: Keys, game_id: str, seat: int | None
) -> dict[str, Any] | None:
    """A game's projected view for a seat (``None``: a spectator), or None if unknown. Its
    ``version`` is the version of the game's log it shows."""
    fields = ["version", "public"] + ([f"seat:{seat}"] if seat is not None else [])
    raw = await redis.hmget(keys.view(game_id), fields)
    if raw[1] is None:
        return None
    view: dict[str, Any] = json.loads(raw[1])
    if seat is not None and raw[2] is not None:
        part = json.loads(raw[2])
        view.update(part["set"])
        for key in part.get("unset", ()):
            del view[key]
    view["version"] = int(raw[0] or 0)
    return view


async def read_view_at(
    redis: Redis, keys: Keys, game_id: str, seat: int | None, version: int, wait_s: float
) -> dict[str, Any] | None:
    """A game's view once the projection has reached ``version``, waiting up to ``wait_s``;
    after that, the newest view there is (older than ``version``, or None). While it is
    behind, the wait blocks on the partition's view updates (``Keys.view_updates``) rather
    than polling: their tail is taken before the view is read again, so a write between
    the two still wakes it."""
    view = await read_view(redis, keys, game_id, seat)
    if _reached(view, version) or wait_s <= 0:
        return view
    updates = keys.view_updates(keys.partition(game_id))
    give_up = time.monotonic() + wait_s
    after: str | None = await _tail(redis, updates)
    while after is not None:
        view = await read_view(redis, keys, game_id, seat)
        if _reached(view, version):
            return view
        after = await _next_update(redis, updates, after, game_id, give_up)
    return view


def _reached(view: dict[str, Any] | None, version: int) -> bool:
    return view is not None and view["version"] >= version


async def _tail(redis: Redis, stream: str) -> str:
    newest: Any = await redis.xrevrange(stream, count=1)
    return newest[0][0].decode() if newest else "0-0"


async def _next_update(
    redis: Redis, stream: str, after: str, game_id: str, give_up: float
) -> str | None:
    """The id of the first view update after ``after`` that names ``game_id``, or None at
    ``give_up`` (a ``time.monotonic()``)."""
    wanted = game_id.encode()
    while (left_ms := int((give_up - time.monotonic()) * 1000)) > 0:
        reply: Any = await redis.xread({stream: after}, count=500, block=left_ms)
        for _, entries in reply or []:
            for entry_id, fields in entries:
                after = entry_id.decode()
                if fields.get(b"g") == wanted:
                    return after
    return None
