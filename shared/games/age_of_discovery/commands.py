"""Commands (a seat's choices), events (facts), decisions and rule violations.

Every choice the rules give a player is a command: a small frozen dataclass naming the seat.
Commands and events are plain data; :func:`command_from_dict` and :meth:`Event.to_dict`
are the way in and out of JSON for the services.
"""

from __future__ import annotations

from dataclasses import MISSING, dataclass, fields
from typing import Any, ClassVar, NamedTuple

# Boxes a unit can be placed in (rules §3 A). Order is resolution order.
BOXES = (
    "initiative",
    "dock",
    "goods",
    "shipping",
    "buildings",
    "discovery",
    "specialists",
    "warfare",
)
SPECIALIST_SPACES = ("captain", "merchant", "missionary", "soldier", "training")
UNIVERSITY_TARGETS = ("dock", "initiative", "buildings", "turn_order")


class RuleViolation(Exception):
    """A command the rules refuse: a machine-readable ``code`` and a human ``reason``."""

    def __init__(self, code: str, reason: str) -> None:
        super().__init__(f"{code}: {reason}")
        self.code = code
        self.reason = reason


class Decision(NamedTuple):
    """Who must decide what now: ``kind`` names the step (place, land, buy, ...)."""

    seat: int
    kind: str


SERVER = "server"
PUBLIC = "public"


class Event(NamedTuple):
    """A fact in a game's log.

    ``data`` is public. ``secret`` holds server-only values (face-down tokens, pile orders,
    the generator state); a redacted copy drops it. ``visibility`` is ``"public"`` or the
    one seat that may see the event (a casualty choice before its battle resolves).
    """

    type: str
    data: dict[str, Any]
    secret: dict[str, Any] | None = None
    visibility: str | int = PUBLIC

    def to_dict(self, include_secret: bool = True) -> dict[str, Any]:
        out: dict[str, Any] = {"type": self.type, "data": self.data, "visibility": self.visibility}
        if include_secret and self.secret is not None:
            out["secret"] = self.secret
        return out

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> Event:
        return cls(raw["type"], raw["data"], raw.get("secret"), raw.get("visibility", PUBLIC))

    def redacted(self) -> Event:
        """The event as a player may receive it: no server-only values."""
        return self if self.secret is None else Event(self.type, self.data, None, self.visibility)

    def visible_to(self, seat: int | None) -> bool:
        return self.visibility == PUBLIC or (seat is not None and self.visibility == seat)


@dataclass(frozen=True, slots=True)
class Command:
    """Base of all commands. ``type`` is the wire name."""

    type: ClassVar[str] = "command"
    seat: int

    def to_dict(self) -> dict[str, Any]:
        """The wire form: ``type`` plus every field (tuples as lists)."""
        out: dict[str, Any] = {"type": self.type}
        for name, _, _ in _SPECS[type(self)]:
            value = getattr(self, name)
            out[name] = list(value) if isinstance(value, tuple) else value
        return out


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

_FIELD_TYPES: dict[str, type | tuple[type, ...]] = {
    "int": int,
    "str": str,
    "int | None": (int, type(None)),
    "str | None": (str, type(None)),
}


# (name, declared type, has a default) for each field of each command class.
_SPECS: dict[type[Command], tuple[tuple[str, str, bool], ...]] = {
    cls: tuple((f.name, str(f.type), f.default is not MISSING) for f in fields(cls))
    for cls in COMMAND_TYPES.values()
}


def command_from_dict(raw: Any) -> Command:
    """Parse a command from JSON-like data, refusing anything malformed with a violation."""
    if not isinstance(raw, dict):
        raise RuleViolation("malformed", "a command is a JSON object")
    kind = raw.get("type")
    cls = COMMAND_TYPES.get(kind) if isinstance(kind, str) else None
    if cls is None:
        raise RuleViolation("unknown_command", f"unknown command type {kind!r}")
    specs = _SPECS[cls]
    args: dict[str, Any] = {}
    for name, declared, has_default in specs:
        if name not in raw:
            if has_default:
                continue
            raise RuleViolation("malformed", f"{kind}: missing field {name!r}")
        value = raw[name]
        if declared == "tuple[str, ...]":
            if not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
                raise RuleViolation("malformed", f"{kind}.{name}: expected a list of strings")
            value = tuple(value)
        elif isinstance(value, bool) or not isinstance(value, _FIELD_TYPES[declared]):
            raise RuleViolation("malformed", f"{kind}.{name}: expected {declared}")
        args[name] = value
    if len(raw) > len(args) + 1:
        unknown = set(raw) - {name for name, _, _ in specs} - {"type"}
        if unknown:
            raise RuleViolation("malformed", f"{kind}: unknown fields {sorted(unknown, key=str)}")
    return cls(**args)
