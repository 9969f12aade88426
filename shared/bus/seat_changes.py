"""The stream of seats whose player changed in a running game (``Keys.seat_changes``): a
human who left. A running table takes no joins, so that is the only change; the bot player
keeps every seat's player it read (``services.ai.seats``) and reads a seat named here
again, instead of reading every human seat at every decision."""

from __future__ import annotations

from typing import Any

from redis.asyncio import Redis
from redis.asyncio.client import Pipeline

KEPT = 10_000  # entries kept: a reader follows the stream live, from its tail


def seat_changed(pipe: Pipeline | Redis, stream: str, game_id: str, seat: int) -> Any:
    """Queue (on a pipeline, after the seats hash's write) or send the change of a seat."""
    fields = {"g": game_id, "s": str(seat)}
    return pipe.xadd(stream, fields, maxlen=KEPT, approximate=True)  # type: ignore[arg-type]


def changed_seat(fields: dict[bytes, bytes]) -> tuple[str, int]:
    """The game and seat a change names."""
    return fields[b"g"].decode(), int(fields[b"s"])
