"""The one bridge between stored envelopes and the registered games.

A log's first event, ``game_created``, names its game; the codec looks it up in the registry
and from then on finds a state's game by the state's type. Snapshots carry the game's name
too. The event store, the engine, the views, scoring and the bots all load games through it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from shared.contracts import EventEnvelope
from shared.games import api


class GameCodec:
    """Builds, evolves and snapshots the state of a game of any registered kind."""

    def initial(self, first: EventEnvelope) -> Any:
        if first.type != api.GAME_CREATED:
            raise ValueError(f"{first.game_id}: a log starts with game_created, not {first.type}")
        game = api.get(first.data["game"])
        return game.initial(to_event(first, game))

    def apply(self, state: Any, event: EventEnvelope) -> None:
        game = api.of(state)
        game.apply(state, to_event(event, game))

    def snapshot(self, state: Any) -> dict[str, Any]:
        game = api.of(state)
        return {**game.snapshot(state), "game": game.name}

    def restore(self, snapshot: dict[str, Any]) -> Any:
        return api.get(snapshot.get("game", api.DEFAULT_GAME)).restore(snapshot)

    def replay(self, events: Iterable[EventEnvelope]) -> Any:
        """The state a whole log leads to (None for an empty one), as loading builds it."""
        state = None
        for event in events:
            if state is None:
                state = self.initial(event)
            self.apply(state, event)
        return state

    def state_hash(self, state: Any) -> str:
        """The hash the engine records as a finished game's final hash."""
        return api.of(state).state_hash(state)


def to_event(envelope: EventEnvelope, game: api.AnyGame | None = None) -> api.Event:
    """The rules' view of a stored event; given its ``game``, in its type's current shape
    (every stored event a game applies is read so: old logs read on)."""
    event = api.Event(envelope.type, envelope.data, envelope.secret, envelope.visibility)
    return event if game is None else game.upcast(event)
