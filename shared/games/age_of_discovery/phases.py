"""The automatic steps between decisions: each phase's resolution (Initiative, shipping,
battles, income, building benefits), age scoring, the end-of-turn refresh and the next turn.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..protocol import Event
from . import rng
from .commands import SPECIALIST_SPACES
from .decisions import _casualty_ranges, _militia
from .emit import _emit, _has, _owned
from .evolve import UNIT
from .income import set_income
from .perform import _add, _token_data
from .ruleset import UNITS
from .scoring import colony_vp, score
from .state import GameState


def _start_turn(s: GameState, out: list[Event], turn: int) -> None:
    """Phase H (units for the turn) then J (the turn marker)."""
    per_turn = s.rules.ruleset.colonists_per_turn
    for seat in range(s.n):
        counts = [per_turn, 0, 0, 0, 0]
        for b in _owned(s, seat):
            if grant := b.effects.get("grant_unit"):
                counts[UNIT[grant["unit"]]] += grant["count"]
        for u, extra in enumerate(s.next_units[seat]):
            counts[u] += extra
        units = {UNITS[u]: c for u, c in enumerate(counts) if c}
        _emit(s, out, "units_granted", {"seat": seat, "units": units})
    _emit(s, out, "turn_started", {"turn": turn, "age": s.rules.age_of_turn(turn)})


def _next_phase(s: GameState, out: list[Event], phase: str, queue: list[Any]) -> None:
    _emit(s, out, "phase", {"phase": phase, "queue": queue})


def _auto_auction(s: GameState, out: list[Event]) -> None:
    winner = s.queue[0]
    order = s.auction_order[:]
    order[0] = winner
    _emit(s, out, "turn_order", {"order": order})
    if s.last_bid[winner]:
        _emit(s, out, "money", {"seat": winner, "amount": -s.last_bid[winner], "reason": "auction"})
    runner_up = order[1]
    half = (s.last_bid[runner_up] + 1) // 2
    if half:
        _emit(s, out, "money", {"seat": runner_up, "amount": -half, "reason": "auction"})
    token = s.unused_tokens[-1]
    caribbean = next(
        s.rules.regions[r] for r, found in enumerate(s.rules.start_discovered) if found
    )
    _emit(
        s,
        out,
        "caribbean_token",
        {"seat": winner, "region": caribbean, "token": _token_data(s, token)},
    )
    if money := s.rules.tokens[token][0]:
        _emit(s, out, "money", {"seat": winner, "amount": money, "reason": "discovery"})
    _add(s, out, winner, caribbean, 1, 0, "auction")
    if s.last_bid[runner_up] >= s.rules.ruleset.values.auction_bonus_min_bid:
        _next_phase(s, out, "auction_bonus", [runner_up])
    else:
        _start_turn(s, out, 1)


def _auto_auction_bonus(s: GameState, out: list[Event]) -> None:
    _start_turn(s, out, 1)


def _auto_placement(s: GameState, out: list[Event]) -> None:
    _next_phase(s, out, "initiative", s.initiative[:])


def _auto_initiative(s: GameState, out: list[Event]) -> None:
    for space, seat in enumerate(s.initiative, 1):
        _emit(s, out, "money", {"seat": seat, "amount": space, "reason": "initiative"})
    queue: list[Any] = [list(e) for e in s.dock]
    if s.dock_x >= 0:
        queue.append([s.dock_x, 0])
    if s.dock_y >= 0:
        queue.append([s.dock_y, 0])
    _next_phase(s, out, "dock", queue)


def _auto_dock(s: GameState, out: list[Event]) -> None:
    _next_phase(s, out, "goods", s.trade[:])


def _auto_goods(s: GameState, out: list[Event]) -> None:
    _next_phase(s, out, "shipping", [list(e) for e in s.shipping])


def _auto_shipping(s: GameState, out: list[Event]) -> None:
    values = s.rules.ruleset.values.shipping_value
    strength = [0] * s.n
    for seat, unit in s.queue:
        strength[seat] += values[UNITS[unit]]
    best = max(strength)
    if s.ship_in_box and best > 0:
        winner = next(seat for seat in s.order if strength[seat] == best)
        _emit(s, out, "ship_taken", {"seat": winner, "strength": strength})
    _next_phase(s, out, "buildings", s.bbox[:])


def _auto_buildings(s: GameState, out: list[Event]) -> None:
    _next_phase(s, out, "discovery", [seat for seat in s.order if any(s.disc[seat])])


def _auto_discovery(s: GameState, out: list[Event]) -> None:
    queue = [[i, seat] for i, seat in enumerate(s.specialists) if seat >= 0]
    _next_phase(s, out, "specialists", queue)


def _auto_specialists(s: GameState, out: list[Event]) -> None:
    training = None
    for space, seat in s.queue:
        if SPECIALIST_SPACES[space] == "training":
            training = seat
        else:
            data = {"seat": seat, "unit": SPECIALIST_SPACES[space], "source": "specialists"}
            _emit(s, out, "specialist_gained", data)
    _next_phase(s, out, "training", [] if training is None else [training])


def _auto_training(s: GameState, out: list[Event]) -> None:
    _next_phase(s, out, "warfare", s.warfare[:])


def _auto_warfare(s: GameState, out: list[Event]) -> None:
    if s.battles:
        _resolve_battle(s, out)
        return
    _income(s, out)
    _building_benefits(s, out)
    queue = []
    for seat in s.order:
        if _has(s, seat, "stable") is not None:
            queue.append([seat, "stable"])
        if _has(s, seat, "migration") is not None:
            queue.append([seat, "migrate"])
    _next_phase(s, out, "upkeep", queue)


def _resolve_battle(s: GameState, out: list[Event]) -> None:
    region, a, d = s.battles[0], s.attacker, s.defender
    ranges = _casualty_ranges(s)
    units, soldiers = s.units[region], s.soldiers[region]
    kills = {a: min(soldiers[a], units[d]), d: min(soldiers[d] + _militia(s, d), units[a])}
    losses = []
    for seat, enemy in ((a, d), (d, a)):
        lo, _ = ranges[enemy]
        killed_soldiers = s.choices.get(enemy, lo)
        losses.append([seat, kills[enemy] - killed_soldiers, killed_soldiers])
    data = {"region": s.rules.regions[region], "attacker": a, "defender": d, "losses": losses}
    _emit(s, out, "battle_resolved", data)


def _income(s: GameState, out: list[Event]) -> None:
    """Phase C: trade-good sets and ships, plus per-good buildings (Rum Distillery, Mint)."""
    values = s.rules.ruleset.values
    sets = (values.set_any_three, values.set_three_same, values.set_four_same)
    goods_index = s.rules.good_index
    for seat in range(s.n):
        amount = set_income(s.goods[seat], s.ships[seat], sets)
        for b in _owned(s, seat):
            if per := b.effects.get("income_per_good"):
                amount += per["amount"] * sum(s.goods[seat][goods_index[g]] for g in per["goods"])
        if amount:
            _emit(s, out, "money", {"seat": seat, "amount": amount, "reason": "income"})


def _building_benefits(s: GameState, out: list[Event]) -> None:
    """Phase D: Privateers first (after income), then every recurring effect in seat order."""
    for owner in range(s.n):
        if privateers := _has(s, owner, "privateers"):
            due = privateers["per_ship"] * s.ships[owner]
            for other in range(s.n):
                paid = min(due, s.money[other]) if other != owner else 0
                if paid:
                    _emit(s, out, "money", {"seat": other, "amount": -paid, "reason": "privateers"})
                    _emit(s, out, "money", {"seat": owner, "amount": paid, "reason": "privateers"})
    for seat in range(s.n):
        for b in _owned(s, seat):
            e = b.effects
            if each := e.get("money_each_turn"):
                _emit(s, out, "money", {"seat": seat, "amount": each["amount"], "reason": b.id})
            if dock := e.get("dock_colonist"):
                _emit(s, out, "dock_reserved", {"seat": seat, "space": dock["space"]})
            if unit := e.get("discovery_unit"):
                _emit(s, out, "discovery_unit_added", {"seat": seat, "unit": unit["unit"]})
            if "random_good" in e and s.goods_pile:
                good = s.rules.goods[s.goods_pile[-1]]
                _emit(s, out, "good_taken", {"seat": seat, "good": good, "source": b.id})


def _auto_upkeep(s: GameState, out: list[Event]) -> None:
    r = s.rules.ruleset
    if s.turn in r.age_end_turns:
        _score_colonies(s, out)
    if s.turn >= r.turns:
        _emit(s, out, "game_ended", {"scores": score(s)})
        return
    _refresh_buildings(s, out)
    _refresh_goods(s, out)
    if not s.ship_in_box and s.ship_supply > 0:
        _emit(s, out, "ship_added", {})
    new_order = s.initiative + [seat for seat in s.order if seat not in s.initiative]
    _emit(s, out, "turn_order", {"order": new_order})
    _start_turn(s, out, s.turn + 1)


def _score_colonies(s: GameState, out: list[Event]) -> None:
    total = [0] * s.n
    detail = {}
    for r, units in enumerate(s.units):
        vp = colony_vp(units, s.rules)
        if any(vp):
            detail[s.rules.regions[r]] = vp
            total = [a + b for a, b in zip(total, vp, strict=True)]
    age = s.rules.age_of_turn(s.turn)
    _emit(s, out, "colonies_scored", {"age": age, "vp": total, "regions": detail})


def _refresh_buildings(s: GameState, out: list[Event]) -> None:
    """Phase E: refill to 5 from the age's pile; at an age end, replace with the next age."""
    r = s.rules.ruleset
    wanted = r.boxes.revealed_buildings
    ids = [b.id for b in s.rules.buildings]
    if s.turn in r.age_end_turns:
        age = s.rules.age_of_turn(s.turn) + 1
        removed = [ids[b] for b in s.revealed_buildings]
        count = wanted
    else:
        age = s.rules.age_of_turn(s.turn)
        removed = []
        count = wanted - len(s.revealed_buildings)
    pile = s.piles[age - 1]
    count = min(count, len(pile))
    revealed = [ids[pile[-1 - i]] for i in range(count)]
    if removed or revealed:
        _emit(s, out, "buildings_revealed", {"age": age, "removed": removed, "revealed": revealed})


def _refresh_goods(s: GameState, out: list[Event]) -> None:
    """Phase F: leftover goods are shuffled back; 4 are revealed."""
    state, pile = rng.shuffled(s.rng, s.goods_pile + s.goods_revealed)
    count = min(s.rules.ruleset.boxes.revealed_goods, len(pile))
    revealed = [pile.pop() for _ in range(count)]
    goods = s.rules.goods
    _emit(
        s,
        out,
        "goods_revealed",
        {"goods": [goods[g] for g in revealed], "pile": len(pile)},
        secret={"goods_pile": pile, "rng": state},
    )


AUTO: dict[str, Callable[[GameState, list[Event]], None]] = {
    "auction": _auto_auction,
    "auction_bonus": _auto_auction_bonus,
    "placement": _auto_placement,
    "initiative": _auto_initiative,
    "dock": _auto_dock,
    "goods": _auto_goods,
    "shipping": _auto_shipping,
    "buildings": _auto_buildings,
    "discovery": _auto_discovery,
    "specialists": _auto_specialists,
    "training": _auto_training,
    "warfare": _auto_warfare,
    "upkeep": _auto_upkeep,
}
