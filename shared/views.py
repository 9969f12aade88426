"""Reading the views projection: a game's projected view for a seat or a spectator.

The lobby's views projector writes them (``Keys.view``: the spectator view, and per seat what
only that seat sees); the HTTP API and the bot player read them here, without replaying a log.
"""

from __future__ import annotations

import json
from typing import Any

from redis.asyncio import Redis

from shared.bus import Keys


async def read_view(
    redis: Redis, keys: Keys, game_id: str, seat: int | None
) -> dict[str, Any] | None:
    """A game's projected view for a seat (``None``: a spectator), or None if unknown."""
    fields = ["version", "public"] + ([f"seat:{seat}"] if seat is not None else [])
    raw = await redis.hmget(keys.view(game_id), fields)
    if raw[1] is None:
        return None
    view: dict[str, Any] = json.loads(raw[1])
    if seat is not None:
        extras = json.loads(raw[2]) if raw[2] else {}
        view["seat"] = seat
        view["legal_commands"] = extras.get("legal_commands", [])
        if "your_casualty_choice" in extras and view["resolving"]:
            view["resolving"]["battle"]["your_choice"] = extras["your_casualty_choice"]
    return view
