"""Making an event, applied to the state as it is made, and the buildings a seat owns,
which most rules consult.
"""

from __future__ import annotations

from typing import Any

from ..protocol import PUBLIC, Event, Visibility
from .evolve import HANDLERS
from .ruleset import CompiledBuilding
from .state import GameState


def _emit(
    s: GameState,
    out: list[Event],
    type_: str,
    data: dict[str, Any],
    secret: dict[str, Any] | None = None,
    visibility: Visibility = PUBLIC,
) -> None:
    """Make an event and apply it (:func:`.evolve.apply`, its handler called directly: the
    hot path of simulation and search)."""
    HANDLERS[type_](s, data, secret)
    s.version += 1
    out.append(_new_event(Event, (type_, data, secret, visibility)))


_new_event = tuple.__new__
"""``Event(...)`` without the named tuple's Python-level ``__new__``: every event is made here."""


def _owned(s: GameState, seat: int) -> list[CompiledBuilding]:
    buildings = s.rules.buildings
    return [buildings[b] for b in s.owned[seat]]


def _has(s: GameState, seat: int, effect: str) -> dict[str, Any] | None:
    buildings = s.rules.buildings
    for b in s.owned[seat]:
        e: dict[str, Any] | None = buildings[b].effects.get(effect)
        if e is not None:
            return e
    return None
