"""The views projection's documents: a game's projected view for a seat or a spectator.

The lobby's views projector writes them (``Keys.view``: the version, the spectator view, and
per seat its part: how the seat's own view differs from the spectator's); the HTTP API and
the bot player read them here, without replaying a log. Storing the difference rather than
each seat's whole view keeps a game's views about as small as one view, whatever the game:
a seat usually sees a little more (its legal commands, its hand), rarely something else.
"""

from __future__ import annotations

import json
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
