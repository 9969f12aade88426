"""The Age of Discovery's events, one class per type: the shape of each event's ``data``
(:mod:`shared.games.events`). The engine emits plain dicts of exactly these fields."""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import model_validator

from ..events import EventData, GameCreated, event_types


class Setup(EventData):
    type: ClassVar[str] = "setup"
    goods_revealed: list[str]
    buildings_revealed: list[str]


class Money(EventData):
    type: ClassVar[str] = "money"
    seat: int
    amount: int
    reason: str


class TurnOrder(EventData):
    type: ClassVar[str] = "turn_order"
    order: list[int]


class UnitsGranted(EventData):
    type: ClassVar[str] = "units_granted"
    seat: int
    units: dict[str, int]


class TurnStarted(EventData):
    type: ClassVar[str] = "turn_started"
    turn: int
    age: int


class UnitPlaced(EventData):
    type: ClassVar[str] = "unit_placed"
    seat: int
    unit: str
    box: str
    space: str | None


class Phase(EventData):
    type: ClassVar[str] = "phase"
    phase: str
    queue: list[Any]


class Landed(EventData):
    type: ClassVar[str] = "landed"
    seat: int
    unit: str
    region: str


class GoodTaken(EventData):
    type: ClassVar[str] = "good_taken"
    seat: int
    good: str
    source: str
    region: str | None = None


class Expedition(EventData):
    """An expedition to a region (``region``, and its ``token`` revealed) or, once every
    region is discovered, to the top discovery card (no ``region``, the ``card`` shown)."""

    # Both shapes were always emitted; only the region's was declared, so a card's
    # expedition failed the typed check: the declaration is mended, the version kept.

    type: ClassVar[str] = "expedition"
    seat: int
    colonists: int
    captains: int
    soldiers: int
    region: str | None
    strength: int
    token: dict[str, int] | None = None
    card: dict[str, int | str] | None = None
    success: bool

    @model_validator(mode="after")
    def _token_or_card(self) -> Expedition:
        if (self.region is None) != (self.card is not None) or (self.token is None) == (
            self.card is None
        ):
            raise ValueError("a region's expedition reveals its token, a card's its card")
        return self


class SpecialistGained(EventData):
    type: ClassVar[str] = "specialist_gained"
    seat: int
    unit: str
    source: str


class Passed(EventData):
    type: ClassVar[str] = "passed"
    seat: int
    decision: str


class GoodsRevealed(EventData):
    type: ClassVar[str] = "goods_revealed"
    goods: list[str]
    pile: int


class ShipTaken(EventData):
    type: ClassVar[str] = "ship_taken"
    seat: int
    strength: list[int]


class BuildingBought(EventData):
    type: ClassVar[str] = "building_bought"
    seat: int
    building: str
    price: int


class FreeDiscovery(EventData):
    type: ClassVar[str] = "free_discovery"
    seat: int
    region: str
    token: dict[str, int]


class UnitsAdded(EventData):
    type: ClassVar[str] = "units_added"
    seat: int
    region: str
    colonists: int
    soldiers: int
    reason: str


class BuildingsRevealed(EventData):
    type: ClassVar[str] = "buildings_revealed"
    age: int
    removed: list[str]
    revealed: list[str]


class ShipAdded(EventData):
    type: ClassVar[str] = "ship_added"


class Conflict(EventData):
    type: ClassVar[str] = "conflict"
    seat: int
    kind: str
    opponent: int
    regions: list[str]


class BattleResolved(EventData):
    type: ClassVar[str] = "battle_resolved"
    region: str
    attacker: int
    defender: int
    losses: list[list[int]]


class ColoniesScored(EventData):
    type: ClassVar[str] = "colonies_scored"
    age: int
    vp: list[int]
    regions: dict[str, list[int]]


class GameEnded(EventData):
    type: ClassVar[str] = "game_ended"
    scores: list[dict[str, Any]]


class DockReserved(EventData):
    type: ClassVar[str] = "dock_reserved"
    seat: int
    space: str


class ColonistsMoved(EventData):
    type: ClassVar[str] = "colonists_moved"
    seat: int
    origin: str
    destination: str
    count: int


class DiscoveryUnitAdded(EventData):
    type: ClassVar[str] = "discovery_unit_added"
    seat: int
    unit: str


class UniversityUsed(EventData):
    type: ClassVar[str] = "university_used"
    seat: int
    box: str
    space: int | None
    to: int


class AuctionBid(EventData):
    type: ClassVar[str] = "auction_bid"
    seat: int
    amount: int


class CaribbeanToken(EventData):
    type: ClassVar[str] = "caribbean_token"
    seat: int
    region: str
    token: dict[str, int]


class CasualtiesChosen(EventData):
    type: ClassVar[str] = "casualties_chosen"
    seat: int
    soldiers: int


class SoldierMoved(EventData):
    type: ClassVar[str] = "soldier_moved"
    seat: int
    origin: str
    destination: str


class DeckShuffled(EventData):
    type: ClassVar[str] = "deck_shuffled"
    cards: int


EVENT_TYPES = event_types(
    (
        GameCreated,
        Setup,
        Money,
        TurnOrder,
        UnitsGranted,
        TurnStarted,
        UnitPlaced,
        Phase,
        Landed,
        GoodTaken,
        Expedition,
        SpecialistGained,
        Passed,
        GoodsRevealed,
        ShipTaken,
        BuildingBought,
        FreeDiscovery,
        UnitsAdded,
        BuildingsRevealed,
        ShipAdded,
        Conflict,
        BattleResolved,
        ColoniesScored,
        GameEnded,
        DockReserved,
        ColonistsMoved,
        DiscoveryUnitAdded,
        UniversityUsed,
        AuctionBid,
        CaribbeanToken,
        CasualtiesChosen,
        SoldierMoved,
        DeckShuffled,
    )
)
