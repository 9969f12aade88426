"""Moving one game's log between deployments (``caravel games export|import``).

Export reads the log as any reader does (Redis, or the archive for an archived game).
Import writes it through the event store's atomic append at version 0, in one script: the
versions stay as they were, the partition's readers (views, scoring) are told as for any
append, and an id already taken (in Redis or in the archive) is refused, also when two
imports race. A finished game then gets its final hash, replayed from the log.
"""

from __future__ import annotations

from collections.abc import Sequence

from shared.contracts import EventEnvelope
from shared.games import api

from .codec import GameCodec
from .logfile import check_log
from .store import Append, EventStore


class GameExists(Exception):
    """An import names a game that Redis or the archive already holds."""

    def __init__(self, game_id: str) -> None:
        super().__init__(f"game {game_id} exists already: nothing was imported")
        self.game_id = game_id


async def export_log(store: EventStore, game_id: str) -> list[EventEnvelope]:
    """The game's whole log with its server-only parts (empty: there is no such game)."""
    return await store.read(game_id)


async def import_log(store: EventStore, events: Sequence[EventEnvelope]) -> int:
    """Append a whole exported log as a new game; returns its version. Raises ValueError
    for a log that is not one game's whole log (or that its game's rules refuse) and
    :class:`GameExists` if the id is taken."""
    game_id = check_log(events)
    if await store.exists(game_id):
        raise GameExists(game_id)
    codec = GameCodec()
    try:
        state = codec.replay(events)
    except Exception as e:  # a file from elsewhere: anything its rules raise means "no"
        raise ValueError(f"{game_id}: the log does not replay: {e}") from e
    result = await store.append(Append(game_id, 0, [event.encode() for event in events]))
    if result.status != "ok":
        raise GameExists(game_id)
    if api.of(state).is_over(state):
        await store.record_final_hash(game_id, codec.state_hash(state), result.version)
    return result.version
