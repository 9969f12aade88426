"""Navegador's commands: every choice the rules give a player, as a small frozen dataclass.

A turn is a few small steps rather than one big command, so that ``legal_commands`` can
list every legal choice: move the stone (:class:`Rondel`, after the card's extra Sailing if
the holder uses it: :class:`UseCard`), pay the ships that move costs one by one
(:class:`PayShip`), then the action's steps, ended by :class:`Pass` (Sailing: :class:`Sail`
one ship, or :class:`Explore` with the exploring party; Colony: :class:`Found`; Buildings:
:class:`Build`; Market: :class:`Sell` or :class:`Process` per good; Workers
:class:`Recruit`; Ships :class:`BuyShips`; Privilege :class:`TakePrivilege`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from ..commands import Command, parse_command


@dataclass(frozen=True, slots=True)
class UseCard(Command):
    """The Navegador card's holder takes its extra Sailing action before moving the stone."""

    type: ClassVar[str] = "use_card"


@dataclass(frozen=True, slots=True)
class Rondel(Command):
    """Move the stone clockwise to ``field`` (0-based, clockwise from the rondel's first
    field); the first placement is free, then each step beyond the free ones costs a ship."""

    type: ClassVar[str] = "rondel"
    field: int


@dataclass(frozen=True, slots=True)
class PayShip(Command):
    """Return one of your ships in ``region`` to your supply, towards the rondel move's cost."""

    type: ClassVar[str] = "pay_ship"
    region: str


@dataclass(frozen=True, slots=True)
class Sail(Command):
    """Sail one ship that has not sailed this action from ``origin`` to an explored region
    within the phase's range."""

    type: ClassVar[str] = "sail"
    origin: str
    destination: str


@dataclass(frozen=True, slots=True)
class Explore(Command):
    """Explore ``region`` with ships arriving together, one per entry of ``origins`` (in the
    map's region order): 2 ships, 3 with the double-loss token."""

    type: ClassVar[str] = "explore"
    region: str
    origins: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Found(Command):
    """Found a colony on the cheapest token of ``region`` (a ship there, two workers)."""

    type: ClassVar[str] = "found"
    region: str


@dataclass(frozen=True, slots=True)
class Build(Command):
    """Buy the cheapest building left on a track (``building``: the track's id)."""

    type: ClassVar[str] = "build"
    building: str


@dataclass(frozen=True, slots=True)
class Sell(Command):
    """Sell ``count`` units of ``good`` (one per colony of it) at its current price."""

    type: ClassVar[str] = "sell"
    good: str
    count: int


@dataclass(frozen=True, slots=True)
class Process(Command):
    """Process ``count`` units of ``good`` (one per factory of it, and the orange one once)
    for the factory income of its current row."""

    type: ClassVar[str] = "process"
    good: str
    count: int


@dataclass(frozen=True, slots=True)
class Recruit(Command):
    """Recruit ``count`` workers: one per church at the facility price, further ones at the
    phase's price."""

    type: ClassVar[str] = "recruit"
    count: int


@dataclass(frozen=True, slots=True)
class BuyShips(Command):
    """Build ``count`` ships in Portugal: one per shipyard at the facility price, further ones
    at the phase's price."""

    type: ClassVar[str] = "buy_ships"
    count: int


@dataclass(frozen=True, slots=True)
class TakePrivilege(Command):
    """Pay a worker and take a privilege of ``column`` from the gallery."""

    type: ClassVar[str] = "privilege"
    column: str


@dataclass(frozen=True, slots=True)
class Pass(Command):
    """End the action under way (the rest of it is declined)."""

    type: ClassVar[str] = "pass"


COMMAND_TYPES: dict[str, type[Command]] = {
    c.type: c
    for c in (
        UseCard,
        Rondel,
        PayShip,
        Sail,
        Explore,
        Found,
        Build,
        Sell,
        Process,
        Recruit,
        BuyShips,
        TakePrivilege,
        Pass,
    )
}


def command_from_dict(raw: Any) -> Command:
    """Parse a command from JSON-like data, refusing anything malformed with a violation."""
    return parse_command(raw, COMMAND_TYPES)
