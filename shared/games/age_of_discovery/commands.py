"""Commands (a seat's choices), events (facts), decisions and rule violations.

Every choice the rules give a player is a command: a small frozen dataclass naming the seat
(the shared types live in :mod:`shared.games.api`). :func:`command_from_dict` and
:meth:`Event.to_dict` are the way in and out of JSON.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from ..commands import Command, parse_command

SPECIALIST_SPACES = ("captain", "merchant", "missionary", "soldier", "training")


@dataclass(frozen=True, slots=True)
class Place(Command):
    """Place an available unit in a box; ``space`` only for the Specialists box."""

    type: ClassVar[str] = "place"
    unit: str
    box: str
    space: str | None = None


@dataclass(frozen=True, slots=True)
class UseUniversity(Command):
    """Free action in your placement turn: move your unit at ``space`` of ``box`` forward
    (to the first space, or one space, by edition), or yourself in the turn order."""

    type: ClassVar[str] = "university"
    box: str
    space: int | None = None


@dataclass(frozen=True, slots=True)
class Pass(Command):
    """Decline an optional action (building, expedition, training, conflict, move, bid)."""

    type: ClassVar[str] = "pass"


@dataclass(frozen=True, slots=True)
class Land(Command):
    """Send the unit being resolved from the Colonist Dock to a discovered region."""

    type: ClassVar[str] = "land"
    region: str


@dataclass(frozen=True, slots=True)
class TakeGood(Command):
    type: ClassVar[str] = "take_good"
    good: str


@dataclass(frozen=True, slots=True)
class BuyBuilding(Command):
    """Buy a revealed building; ``regions`` carries any immediate choice it needs
    (Cartography: 1 region, Indian Allies: 1 region, Overpopulation: 3 regions)."""

    type: ClassVar[str] = "buy"
    building: str
    regions: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Expedition(Command):
    """Send units from Discovery to an undiscovered region (``None``: the discovery deck)."""

    type: ClassVar[str] = "expedition"
    colonists: int
    captains: int
    soldiers: int
    region: str | None


@dataclass(frozen=True, slots=True)
class TakeSpecialist(Command):
    """Training (pay $5) or the auction's runner-up bonus: take a specialist of any kind."""

    type: ClassVar[str] = "specialist"
    unit: str


@dataclass(frozen=True, slots=True)
class Battle(Command):
    type: ClassVar[str] = "battle"
    region: str
    opponent: int


@dataclass(frozen=True, slots=True)
class War(Command):
    type: ClassVar[str] = "war"
    opponent: int


@dataclass(frozen=True, slots=True)
class Casualties(Command):
    """How many of the enemy's soldiers your kills take in the current battle (the rest are
    colonists)."""

    type: ClassVar[str] = "casualties"
    soldiers: int


@dataclass(frozen=True, slots=True)
class MoveSoldier(Command):
    """Stable: move one soldier to an adjacent region."""

    type: ClassVar[str] = "move_soldier"
    origin: str
    destination: str


@dataclass(frozen=True, slots=True)
class Migrate(Command):
    """Migration: move up to two colonists from one region to another."""

    type: ClassVar[str] = "migrate"
    origin: str
    destination: str
    count: int


@dataclass(frozen=True, slots=True)
class Bid(Command):
    """Starting-order auction: bid more than the current high bid."""

    type: ClassVar[str] = "bid"
    amount: int


COMMAND_TYPES: dict[str, type[Command]] = {
    c.type: c
    for c in (
        Place,
        UseUniversity,
        Pass,
        Land,
        TakeGood,
        BuyBuilding,
        Expedition,
        TakeSpecialist,
        Battle,
        War,
        Casualties,
        MoveSoldier,
        Migrate,
        Bid,
    )
}


def command_from_dict(raw: Any) -> Command:
    """Parse a command from JSON-like data, refusing anything malformed with a violation."""
    return parse_command(raw, COMMAND_TYPES)
