"""The shape of a view (:func:`.views.view`: the public view, a seat's private part over it)
as types, for its JSON schema: what ``GET /games/{id}/view`` documents and what clients may rely on.

``views`` itself keeps building plain dicts, fast, because the bots' search builds views by
the hundred thousand; these types only describe them. They follow ``views`` branch by
branch: a key that is sometimes absent is ``NotRequired`` (``auction`` outside the auction,
``battle`` outside a battle, a seat's ``legal_commands`` and ``your_choice``), a value that
is sometimes null is ``| None``; every object forbids other keys. Names the ruleset chooses
(nations, regions, goods, buildings, cards) are plain strings, since a ruleset file may
name its own; names fixed by the rules' mechanics (units, phases, decisions, boxes'
specialist spaces) are literals. tests/games/test_view_schema.py validates real views of
random games against the schema, so the two cannot drift apart unnoticed.
"""

from __future__ import annotations

from functools import cache
from typing import Annotated, Any, Literal, NotRequired

from pydantic import ConfigDict, Field, WithJsonSchema, with_config
from typing_extensions import TypedDict

from ..view_schema import ViewRules, legal_command_schema, seat_or_spectator
from .commands import COMMAND_TYPES

_STRICT = ConfigDict(extra="forbid")

Phase = Literal[
    "setup",
    "auction",
    "auction_bonus",
    "placement",
    "initiative",
    "dock",
    "goods",
    "shipping",
    "buildings",
    "discovery",
    "specialists",
    "training",
    "warfare",
    "upkeep",
    "over",
]
DecisionKind = Literal[
    "bid",
    "place",
    "land",
    "take_good",
    "buy",
    "expedition",
    "specialist",
    "conflict",
    "casualties",
    "move",
]
Unit = Literal["colonist", "captain", "merchant", "missionary", "soldier"]


@with_config(_STRICT)
class UnitCounts(TypedDict, total=False):
    """Units by type; a type with none is left out."""

    colonist: int
    captain: int
    merchant: int
    missionary: int
    soldier: int


@with_config(_STRICT)
class Token(TypedDict):
    """A discovery token's face."""

    money: int
    plunder: int
    natives: int
    vp: int


@with_config(_STRICT)
class DiscoveryBox(TypedDict):
    colonists: int
    captains: int
    soldiers: int


@with_config(_STRICT)
class Player(TypedDict):
    seat: int
    name: str
    nation: str
    color: str
    money: int
    available: UnitCounts
    next_turn: UnitCounts
    goods: dict[str, int]  # by the ruleset's good names; a good held at 0 is left out
    ships: int
    buildings: list[str]
    university_used: bool
    tokens: list[Token]
    cards: list[str]
    colony_vp: list[int]  # per age
    discovery_box: DiscoveryBox
    units_received: int
    units_returned: int
    income_from_sets: int


@with_config(_STRICT)
class Region(TypedDict):
    id: str
    good: str
    good_present: bool
    discovered: bool
    token: Literal["face_down"] | None
    known_token: Token | None  # a face-down token a failed expedition showed everyone
    units: list[int]  # per seat
    soldiers: list[int]  # per seat


@with_config(_STRICT)
class PlacedUnit(TypedDict):
    seat: int
    unit: Unit


@with_config(_STRICT)
class SpecialistSpaces(TypedDict):
    """The seat on each space of the Specialists box (null: free)."""

    captain: int | None
    merchant: int | None
    missionary: int | None
    soldier: int | None
    training: int | None


@with_config(_STRICT)
class Boxes(TypedDict):
    initiative: list[int]
    dock: list[PlacedUnit]
    dock_x: int | None
    dock_y: int | None
    goods: list[int]
    shipping: list[PlacedUnit]
    buildings: list[int]
    specialists: SpecialistSpaces
    warfare: list[int]


# An entry of the box being resolved: a seat, or a pair whose meaning depends on the box
# (seat and unit index at the dock and in shipping, space and seat for specialists, seat and
# "stable" or "migrate" in upkeep). A list, not ``tuple[int, int | str]``: a tuple's
# ``prefixItems`` is valid OpenAPI 3.1, but schemathesis rewrites it to the draft-4 form and
# then refuses it as a response schema; the pair's first item is an integer all the same.
QueueEntry = int | Annotated[list[int | str], Field(min_length=2, max_length=2)]


@with_config(_STRICT)
class Battle(TypedDict):
    """The battle being fought, as everyone sees it: who has chosen casualties, never what."""

    region: str
    attacker: int
    defender: int
    remaining: list[str]
    chosen: list[int]


@with_config(_STRICT)
class SeatBattle(TypedDict):
    """The battle as a seat sees it: its own casualty choice too, once made."""

    region: str
    attacker: int
    defender: int
    remaining: list[str]
    chosen: list[int]
    your_choice: NotRequired[int]


@with_config(_STRICT)
class Resolving(TypedDict):
    queue: list[QueueEntry]
    cursor: int
    battle: NotRequired[Battle]


@with_config(_STRICT)
class SeatResolving(TypedDict):
    queue: list[QueueEntry]
    cursor: int
    battle: NotRequired[SeatBattle]


@with_config(_STRICT)
class Auction(TypedDict):
    """The starting-order auction (only while it runs)."""

    high_bid: int
    high_bidder: int | None
    bidders: list[int]
    places: list[int | None]  # per seat: its place in the turn order, once won
    last_bids: list[int]


@with_config(_STRICT)
class Pending(TypedDict):
    seat: int
    kind: DecisionKind


@with_config(_STRICT)
class Score(TypedDict):
    seat: int
    colonies: int
    colonies_by_age: list[int]
    discoveries: int
    buildings: int
    economy: int
    total: int
    tiebreak: list[int]
    place: int


class _Common(ViewRules):
    """What every view of the game holds (not a schema of its own: see the two below)."""

    game: Literal["age_of_discovery"]
    turn: int
    age: int
    phase: Phase
    version: int
    pending: list[Pending]
    turn_order: list[int]
    players: list[Player]
    regions: list[Region]
    boxes: Boxes
    goods_revealed: list[str]
    goods_pile_size: int
    buildings_revealed: list[str]
    building_piles: list[int]
    discovery_deck: int
    ship_in_box: bool
    ships_in_supply: int
    scores: list[Score]
    auction: NotRequired[Auction]


LegalCommand = Annotated[dict[str, Any], WithJsonSchema(legal_command_schema(COMMAND_TYPES))]


@with_config(_STRICT)
class SpectatorView(_Common):
    """A spectator's view: no seat, no legal commands, nobody's private choice."""

    seat: None
    resolving: Resolving | None


@with_config(_STRICT)
class SeatView(_Common):
    """A seat's view: the spectator's, plus its legal commands (empty when it has nothing to
    decide) and its own casualty choice in a battle."""

    seat: int
    resolving: SeatResolving | None
    legal_commands: list[LegalCommand]


@cache
def view_schema() -> dict[str, Any]:
    """The JSON schema of a view, a seat's or a spectator's (``$defs`` referenced locally).
    Cached: it never changes, and callers must not modify it (copy it first)."""
    return seat_or_spectator(SeatView, SpectatorView, "age_of_discovery view")
