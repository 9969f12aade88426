"""The streams of seats whose player changed in a running game (``Keys.seat_changes``, one
per partition): a human who left. A running table takes no joins, so that is the only
change; the bot player keeps every seat's player it read (``services.ai.seats``) and reads a
seat named here again, instead of reading every human seat at every decision. A change is a
:class:`~shared.contracts.SeatChange` published through FastStream (its JSON in the entry's
body field).

Per partition since issue 25: one stream for all partitions lay on one shard, and while that
shard was away a bot player could not start (it reads the stream's tail first), and a leave
of a game on any shard failed on it. The old stream (``<prefix>:seatchanges``) is neither
read nor written: a change is a hint to read a seat again, not data; a leave written there by
a lobby not yet upgraded is missed by an upgraded bot player, whose book then keeps the
leaver's seat as a human's and plays it (as the fallback) when its clock runs out instead of
at once. What is left in the old key (at most :data:`KEPT` entries) can be deleted by hand."""

from __future__ import annotations

from typing import Any

from shared.contracts import SeatChange

from .consumer import Broker
from .faststream_ext import BODY
from .keys import Keys

KEPT = 10_000  # entries kept per partition: a reader follows the streams live, from their tails


async def seat_changed(broker: Broker, pipe: Any, keys: Keys, game_id: str, seat: int) -> None:
    """Queue on ``pipe`` (a pipeline of ``broker``'s client, after the seats hash's write)
    the change of a seat, on its game's partition's stream (the seats hash's slot)."""
    body = SeatChange(game_id=game_id, seat=seat).encode()
    stream = keys.seat_changes(keys.partition(game_id))
    await broker.publish_in(pipe, body, stream, maxlen=KEPT)


def changed_seat(fields: dict[bytes, bytes]) -> tuple[str, int]:
    """The game and seat a change names."""
    change = SeatChange.decode(fields[BODY])
    return change.game_id, change.seat
