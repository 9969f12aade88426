"""The stream of seats whose player changed in a running game (``Keys.seat_changes``): a
human who left. A running table takes no joins, so that is the only change; the bot player
keeps every seat's player it read (``services.ai.seats``) and reads a seat named here
again, instead of reading every human seat at every decision. A change is a
:class:`~shared.contracts.SeatChange` published through FastStream (its JSON in the entry's
body field)."""

from __future__ import annotations

from typing import Any

from shared.contracts import SeatChange

from .consumer import Broker
from .faststream_ext import BODY

KEPT = 10_000  # entries kept: a reader follows the stream live, from its tail


async def seat_changed(broker: Broker, pipe: Any, stream: str, game_id: str, seat: int) -> None:
    """Queue on ``pipe`` (a pipeline of ``broker``'s client, after the seats hash's write)
    the change of a seat."""
    body = SeatChange(game_id=game_id, seat=seat).encode()
    await broker.publish_in(pipe, body, stream, maxlen=KEPT)


def changed_seat(fields: dict[bytes, bytes]) -> tuple[str, int]:
    """The game and seat a change names."""
    change = SeatChange.decode(fields[BODY])
    return change.game_id, change.seat
