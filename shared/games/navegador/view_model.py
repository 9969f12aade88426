"""The shape of a Navegador view (:func:`.views.view`) as types, for its JSON schema.

``views`` builds plain dicts, fast; these types only describe them, branch by branch: a
value that is sometimes null is ``| None``, a seat's ``legal_commands`` is absent from a
spectator's view, every object forbids other keys. Names a ruleset chooses (regions, goods,
buildings) are plain strings; names fixed by the mechanics (columns, stages) are literals.
tests/games/test_view_schema.py validates real views against the schema.
"""

from __future__ import annotations

from functools import cache
from typing import Annotated, Any, Literal

from pydantic import ConfigDict, WithJsonSchema, with_config
from typing_extensions import TypedDict

from ..view_schema import ViewRules, legal_command_schema, seat_or_spectator
from .commands import COMMAND_TYPES

_STRICT = ConfigDict(extra="forbid")

Stage = Literal[
    "turn",
    "pay",
    "sailing",
    "workers",
    "market",
    "colony",
    "privilege",
    "ships",
    "buildings",
    "over",
]
Action = Literal["sailing", "workers", "market", "colony", "privilege", "ships", "buildings"]


@with_config(_STRICT)
class Privileges(TypedDict):
    """Per column of the player sheet: privileges held, in the gallery, or in the supply."""

    colony: int
    factory: int
    explorer: int
    shipyard: int
    church: int


@with_config(_STRICT)
class Player(TypedDict):
    seat: int
    name: str
    money: int
    workers: int
    stone: int | None  # rondel field; null before the first placement
    ships: list[int]  # per region, in the map's order
    ships_in_supply: int
    colonies: dict[str, list[int]]  # per good: the founded tokens' prices
    factories: dict[str, int]  # per good, the orange one apart
    wildcard_factories: int
    shipyards: int
    churches: int
    explorers: int
    privileges: Privileges


@with_config(_STRICT)
class Region(TypedDict):
    id: str
    name: str
    good: str | None  # null: the home region, which holds no colonies
    explored: bool
    explorer: int | None
    double_loss: bool
    tokens: list[int] | None  # the face-up stack; null while it lies face down
    face_down: int  # tokens in the face-down stack


@with_config(_STRICT)
class Card(TypedDict):
    holder: int
    marker: int | None  # the orange ship's field
    usable: bool


@with_config(_STRICT)
class ActionProgress(TypedDict):
    card_sail: bool
    sailed: list[int]  # per region: ships that sailed there this action (may not sail again)
    explored: bool  # this Sailing action has explored
    colony_ships: list[int]  # per region: ships serving a colony this action
    workers_used: int
    traded: list[str]  # goods sold or processed this action
    wildcard_used: bool


@with_config(_STRICT)
class MarketRow(TypedDict):
    good: str
    row: int  # 1 is the top
    price: int
    factory_income: int


Column = Literal["colony", "factory", "explorer", "shipyard", "church"]


@with_config(_STRICT)
class BuildingTrack(TypedDict):
    id: str
    column: Column  # the player sheet's column it adds to
    good: str | None  # a factory's good; null for shipyards and churches
    workers: int  # workers it needs (owned, not spent)
    left: int
    price: int | None  # the next building's price; null once the track is empty


@with_config(_STRICT)
class SheetColumn(TypedDict):
    """A column of the player sheet: VP per achievement, and per privilege position (top to
    bottom) its coin and the VP it adds."""

    id: Column
    base_vp: int
    coins: list[int]
    vp: list[int]
    king_vp: int


@with_config(_STRICT)
class Board(TypedDict):
    """The ruleset's fixed figures: the map's borders (pairs of region ids), the sailing
    range per phase, the rondel's free steps, the player sheet."""

    borders: list[tuple[str, str]]
    sailing_range: list[int]  # borders a ship may cross, per phase (I first)
    free_steps: int  # rondel steps free of charge; each further one costs a ship
    columns: list[SheetColumn]


@with_config(_STRICT)
class End(TypedDict):
    triggered: bool
    final_turns_left: int | None


@with_config(_STRICT)
class Pending(TypedDict):
    seat: int
    kind: Stage


@with_config(_STRICT)
class Score(TypedDict):
    seat: int
    workers: int
    ships: int
    money: int
    colony_vp: int
    factory_vp: int
    explorer_vp: int
    shipyard_vp: int
    church_vp: int
    total: int
    king: Column | None
    tiebreak: list[int]
    place: int


class _Common(ViewRules):
    """What every view of the game holds (not a schema of its own: see the two below)."""

    game: Literal["navegador"]
    turn: int
    phase: int
    next_phase: int | None
    stage: Stage
    current: int
    start_player: int
    owed_ships: int
    rondel: list[Action]
    board: Board
    card: Card
    action: ActionProgress
    players: list[Player]
    regions: list[Region]
    removed_tokens: dict[str, int]
    market: list[MarketRow]
    buildings: list[BuildingTrack]
    gallery: Privileges
    privilege_supply: Privileges
    end: End
    pending: list[Pending]
    scores: list[Score]


LegalCommand = Annotated[dict[str, Any], WithJsonSchema(legal_command_schema(COMMAND_TYPES))]


@with_config(_STRICT)
class SpectatorView(_Common):
    """A spectator's view: no seat, no legal commands."""

    seat: None


@with_config(_STRICT)
class SeatView(_Common):
    """A seat's view: the spectator's plus its legal commands (empty when not pending)."""

    seat: int
    legal_commands: list[LegalCommand]


@cache
def view_schema() -> dict[str, Any]:
    """The JSON schema of a view, a seat's or a spectator's (``$defs`` referenced locally).
    Cached: callers must not modify it (copy it first)."""
    return seat_or_spectator(SeatView, SpectatorView, "navegador view")
