"""Navegador's events, one class per type: the shape of each event's ``data``
(:mod:`shared.games.events`). The engine emits plain dicts of exactly these fields."""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import Field

from ..events import EventData, GameCreated, event_types


class Setup(EventData):
    type: ClassVar[str] = "setup"
    start_player: int
    card_holder: int


class TurnStarted(EventData):
    type: ClassVar[str] = "turn_started"
    seat: int
    turn: int


class RondelMoved(EventData):
    type: ClassVar[str] = "rondel_moved"
    seat: int
    field: int
    action: str
    steps: int
    cost: int


class GoodsProcessed(EventData):
    type: ClassVar[str] = "goods_processed"
    seat: int
    good: str
    count: int
    each: int
    wildcard: bool
    income: int
    row: int


class ActionEnded(EventData):
    type: ClassVar[str] = "action_ended"
    seat: int
    action: str


class TurnEnded(EventData):
    type: ClassVar[str] = "turn_ended"
    seat: int
    final_turns_left: int


class BuildingBought(EventData):
    type: ClassVar[str] = "building_bought"
    seat: int
    building: str
    price: int


class ShipPaid(EventData):
    type: ClassVar[str] = "ship_paid"
    seat: int
    region: str


class CardUsed(EventData):
    type: ClassVar[str] = "card_used"
    seat: int


class Explored(EventData):
    type: ClassVar[str] = "explored"
    seat: int
    region: str
    origins: list[str]
    lost: int
    tokens: list[int]
    bonus: int
    starts_phase: int


class CardPassed(EventData):
    type: ClassVar[str] = "card_passed"
    from_: int = Field(alias="from")
    to: int
    marker: int
    reason: str


class WorkersRecruited(EventData):
    type: ClassVar[str] = "workers_recruited"
    seat: int
    count: int
    cost: int
    gained: int
    sold: int
    income: int


class PrivilegeTaken(EventData):
    type: ClassVar[str] = "privilege_taken"
    seat: int
    column: str
    position: int
    coin: int
    achievements: int
    income: int


class ShipSailed(EventData):
    type: ClassVar[str] = "ship_sailed"
    seat: int
    origin: str
    destination: str


class ShipsBought(EventData):
    type: ClassVar[str] = "ships_bought"
    seat: int
    count: int
    cost: int
    gained: int
    sold: int
    income: int


class ColonyFounded(EventData):
    type: ClassVar[str] = "colony_founded"
    seat: int
    region: str
    good: str
    price: int


class EndTriggered(EventData):
    type: ClassVar[str] = "end_triggered"
    seat: int
    reason: str
    region: str | None


class GameEnded(EventData):
    type: ClassVar[str] = "game_ended"
    results: list[dict[str, Any]]


class GoodsSold(EventData):
    type: ClassVar[str] = "goods_sold"
    seat: int
    good: str
    count: int
    price: int
    income: int
    row: int


class PhaseStarted(EventData):
    type: ClassVar[str] = "phase_started"
    phase: int
    gallery: list[int]


EVENT_TYPES = event_types(
    (
        GameCreated,
        Setup,
        TurnStarted,
        RondelMoved,
        GoodsProcessed,
        ActionEnded,
        TurnEnded,
        BuildingBought,
        ShipPaid,
        CardUsed,
        Explored,
        CardPassed,
        WorkersRecruited,
        PrivilegeTaken,
        ShipSailed,
        ShipsBought,
        ColonyFounded,
        EndTriggered,
        GameEnded,
        GoodsSold,
        PhaseStarted,
    )
)
