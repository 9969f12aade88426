"""What a command causes: the events of each kind of command (placing, landing, buying,
expeditions, specialists, conflicts, moves, bids).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..commands import Command
from ..protocol import Decision, Event
from . import rng
from .commands import (
    Battle,
    Bid,
    BuyBuilding,
    Casualties,
    Expedition,
    Land,
    Migrate,
    MoveSoldier,
    Pass,
    Place,
    TakeGood,
    TakeSpecialist,
    UseUniversity,
    War,
)
from .emit import _emit, _has
from .legal import _price, _university_moves, _war_regions
from .ruleset import MERCHANT, MISSIONARY, UNITS
from .state import GameState

Perform = Callable[[GameState, Command, Decision, list[Event]], None]


def _perform_place(s: GameState, c: Command, d: Decision, out: list[Event]) -> None:
    assert isinstance(c, Place)
    _emit(s, out, "unit_placed", {"seat": c.seat, "unit": c.unit, "box": c.box, "space": c.space})


def _perform_university(s: GameState, c: Command, d: Decision, out: list[Event]) -> None:
    assert isinstance(c, UseUniversity)
    to = next(
        t for box, space, t in _university_moves(s, c.seat) if (box, space) == (c.box, c.space)
    )
    _emit(s, out, "university_used", {"seat": c.seat, "box": c.box, "space": c.space, "to": to})


def _perform_pass(s: GameState, c: Command, d: Decision, out: list[Event]) -> None:
    _emit(s, out, "passed", {"seat": c.seat, "decision": d.kind})


def _perform_land(s: GameState, c: Command, d: Decision, out: list[Event]) -> None:
    assert isinstance(c, Land)
    seat, unit = s.queue[s.cursor]
    name = UNITS[unit]
    _emit(s, out, "landed", {"seat": seat, "unit": name, "region": c.region})
    v = s.rules.ruleset.values
    if unit == MERCHANT and v.merchant_arrival_money:
        _emit(
            s,
            out,
            "money",
            {"seat": seat, "amount": v.merchant_arrival_money, "reason": "merchant"},
        )
    if unit == MISSIONARY:
        bonus = _has(s, seat, "missionary_bonus")
        extra = bonus["colonists"] if bonus else v.missionary_colonists
        _add(s, out, seat, c.region, extra, 0, "missionary")
    _check_region_good(s, out, seat, s.rules.region_index[c.region])


def _add(
    s: GameState,
    out: list[Event],
    seat: int,
    region: str,
    colonists: int,
    soldiers: int,
    reason: str,
) -> None:
    data = {
        "seat": seat,
        "region": region,
        "colonists": colonists,
        "soldiers": soldiers,
        "reason": reason,
    }
    _emit(s, out, "units_added", data)
    _check_region_good(s, out, seat, s.rules.region_index[region])


def _check_region_good(s: GameState, out: list[Event], seat: int, region: int) -> None:
    """The first player with 3 units in a region takes its good, if it is still there."""
    if s.region_good[region] and s.units[region][seat] >= s.rules.ruleset.values.colony_min_units:
        good = s.rules.goods[s.rules.region_good[region]]
        data = {"seat": seat, "good": good, "source": "region", "region": s.rules.regions[region]}
        _emit(s, out, "good_taken", data)


def _perform_take_good(s: GameState, c: Command, d: Decision, out: list[Event]) -> None:
    assert isinstance(c, TakeGood)
    _emit(s, out, "good_taken", {"seat": c.seat, "good": c.good, "source": "market"})


def _perform_buy(s: GameState, c: Command, d: Decision, out: list[Event]) -> None:
    assert isinstance(c, BuyBuilding)
    seat, price = c.seat, _price(s)
    _emit(s, out, "building_bought", {"seat": seat, "building": c.building, "price": price})
    _emit(s, out, "money", {"seat": seat, "amount": -price, "reason": "building"})
    effects = s.rules.buildings[s.rules.building_index[c.building]].effects
    if once := effects.get("money_once"):
        _emit(s, out, "money", {"seat": seat, "amount": once["amount"], "reason": c.building})
    if "free_discovery" in effects and c.regions:
        region = c.regions[0]
        token = s.token_on[s.rules.region_index[region]]
        data = {"seat": seat, "region": region, "token": _token_data(s, token)}
        _emit(s, out, "free_discovery", data)
        _reward(s, out, seat, region, token, 0)
    if (allies := effects.get("indian_allies")) and c.regions:
        _add(s, out, seat, c.regions[0], 0, allies["soldiers"], c.building)
    if "place_colonists" in effects:
        for region in c.regions:
            _add(s, out, seat, region, 1, 0, c.building)


def _reward(
    s: GameState, out: list[Event], seat: int, region: str, token: int, soldiers: int
) -> None:
    """A discovered region pays: a free colonist there, the token's $ and plunder per soldier."""
    money, plunder = s.rules.tokens[token][:2]
    _add(s, out, seat, region, 1, 0, "discovery")
    if amount := money + plunder * soldiers:
        _emit(s, out, "money", {"seat": seat, "amount": amount, "reason": "discovery"})


def _token_data(s: GameState, token: int) -> dict[str, int]:
    money, plunder, natives, vp = s.rules.tokens[token]
    return {"index": token, "money": money, "plunder": plunder, "natives": natives, "vp": vp}


def _perform_expedition(s: GameState, c: Command, d: Decision, out: list[Event]) -> None:
    assert isinstance(c, Expedition)
    values = s.rules.ruleset.values.discovery_value
    strength = (
        c.colonists * values["colonist"]
        + c.captains * values["captain"]
        + c.soldiers * values["soldier"]
    )
    data: dict[str, Any] = {
        "seat": c.seat,
        "colonists": c.colonists,
        "captains": c.captains,
        "soldiers": c.soldiers,
        "region": c.region,
        "strength": strength,
    }
    if c.region is None:
        card = s.deck[-1]
        money, plunder, natives, vp = s.rules.cards[card]
        success = strength >= natives
        data["card"] = {
            "index": card,
            "name": s.rules.ruleset.cards[card].name,
            "money": money,
            "plunder": plunder,
            "natives": natives,
            "vp": vp,
        }
        _emit(s, out, "expedition", {**data, "success": success})
        if success:
            if amount := money + plunder * c.soldiers:
                _emit(s, out, "money", {"seat": c.seat, "amount": amount, "reason": "discovery"})
        else:
            state, deck = rng.shuffled(s.rng, s.deck)
            _emit(
                s, out, "deck_shuffled", {"cards": len(deck)}, secret={"deck": deck, "rng": state}
            )
        return
    r = s.rules.region_index[c.region]
    token = s.token_on[r]
    success = strength >= s.rules.tokens[token][2]
    data["token"] = _token_data(s, token)
    _emit(s, out, "expedition", {**data, "success": success})
    if success:
        _reward(s, out, c.seat, c.region, token, c.soldiers)


def _perform_specialist(s: GameState, c: Command, d: Decision, out: list[Event]) -> None:
    assert isinstance(c, TakeSpecialist)
    if s.phase == "auction_bonus":
        _emit(s, out, "specialist_gained", {"seat": c.seat, "unit": c.unit, "source": "auction"})
        return
    cost = s.rules.ruleset.values.training_cost
    _emit(s, out, "specialist_gained", {"seat": c.seat, "unit": c.unit, "source": "training"})
    _emit(s, out, "money", {"seat": c.seat, "amount": -cost, "reason": "training"})


def _perform_battle(s: GameState, c: Command, d: Decision, out: list[Event]) -> None:
    assert isinstance(c, Battle)
    data = {"seat": c.seat, "kind": "battle", "opponent": c.opponent, "regions": [c.region]}
    _emit(s, out, "conflict", data)


def _perform_war(s: GameState, c: Command, d: Decision, out: list[Event]) -> None:
    assert isinstance(c, War)
    regions = [s.rules.regions[r] for r in _war_regions(s, c.seat, c.opponent)]
    _emit(
        s,
        out,
        "conflict",
        {"seat": c.seat, "kind": "war", "opponent": c.opponent, "regions": regions},
    )
    cost = s.rules.ruleset.values.war_cost
    _emit(s, out, "money", {"seat": c.seat, "amount": -cost, "reason": "war"})


def _perform_casualties(s: GameState, c: Command, d: Decision, out: list[Event]) -> None:
    assert isinstance(c, Casualties)
    data = {"seat": c.seat, "soldiers": c.soldiers}
    _emit(s, out, "casualties_chosen", data, visibility=c.seat)


def _perform_move_soldier(s: GameState, c: Command, d: Decision, out: list[Event]) -> None:
    assert isinstance(c, MoveSoldier)
    _emit(
        s, out, "soldier_moved", {"seat": c.seat, "origin": c.origin, "destination": c.destination}
    )
    _check_region_good(s, out, c.seat, s.rules.region_index[c.destination])


def _perform_migrate(s: GameState, c: Command, d: Decision, out: list[Event]) -> None:
    assert isinstance(c, Migrate)
    data = {"seat": c.seat, "origin": c.origin, "destination": c.destination, "count": c.count}
    _emit(s, out, "colonists_moved", data)
    _check_region_good(s, out, c.seat, s.rules.region_index[c.destination])


def _perform_bid(s: GameState, c: Command, d: Decision, out: list[Event]) -> None:
    assert isinstance(c, Bid)
    _emit(s, out, "auction_bid", {"seat": c.seat, "amount": c.amount})


PERFORM: dict[type[Command], Perform] = {
    Place: _perform_place,
    UseUniversity: _perform_university,
    Pass: _perform_pass,
    Land: _perform_land,
    TakeGood: _perform_take_good,
    BuyBuilding: _perform_buy,
    Expedition: _perform_expedition,
    TakeSpecialist: _perform_specialist,
    Battle: _perform_battle,
    War: _perform_war,
    Casualties: _perform_casualties,
    MoveSoldier: _perform_move_soldier,
    Migrate: _perform_migrate,
    Bid: _perform_bid,
}
