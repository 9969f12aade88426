"""The Age of Discovery's greedy policy: a value for every legal command, from a seat's
observation alone (income, colony majorities, age scoring, building worth for the turns
left, expedition odds from what has been revealed). It looks one decision ahead. The
``greedy`` bot plays its best command; the ``mcts`` bot orders its search and plays its
playouts with it.

Every figure printed on the board (prices, turns, set values, the training cost, colony
size, unit strengths) is the ruleset's, read once per ruleset: the policy runs thousands of
times a second inside the search. The weights of the heuristic are the policy's own.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from functools import cached_property, lru_cache
from typing import Any, NamedTuple

from ..ruleset_files import CARRIED
from .income import set_income
from .ruleset import Rules

Observation = dict[str, Any]
Command = dict[str, Any]


def greedy_values(observation: Observation, rng: random.Random) -> list[float]:
    """The greedy bot's value of each legal command (a tiny random part breaks ties); the
    ``mcts`` level uses it too, to order its search and to play its playouts."""
    seen = _Seen(observation)
    return [_VALUE[c["type"]](seen, c) + rng.random() * 1e-3 for c in observation["legal_commands"]]


# --- what the greedy bot reads off its observation -------------------------------------------


class _Board(NamedTuple):
    """The figures printed on the board that the policy weighs commands with."""

    prices: tuple[int, ...]  # a building's price, by age
    turns: int
    sets: tuple[int, int, int]  # income of any three goods, three alike, four alike
    training_cost: int  # a specialist's price
    colony_min: int  # units that hold a region's good
    shipping: dict[str, int]  # a unit's strength in the shipping box
    discovery: tuple[int, int, int]  # strength of a colonist, a captain, a soldier sent out


@lru_cache(maxsize=16)
def _board(ruleset: str, file: str | None) -> _Board:
    """The board of a ruleset, or of the ruleset file's text an observation carries, from
    the game's rules cache (edition options change none of these figures, so the default
    options do)."""
    from . import GAME  # the package imports this module before it registers the game

    rules: Rules = GAME.rules_named({"ruleset": ruleset, "options": {}, CARRIED: file})
    r = rules.ruleset
    values = r.values
    found = values.discovery_value
    return _Board(
        tuple(r.building_prices),
        r.turns,
        (values.set_any_three, values.set_three_same, values.set_four_same),
        values.training_cost,
        values.colony_min_units,
        {unit: strength for unit, strength in values.shipping_value.items()},
        (found["colonist"], found["captain"], found["soldier"]),
    )


class _Seen:
    """Convenient reads of an observation for the seat it belongs to."""

    def __init__(self, o: Observation) -> None:
        self.o = o
        self.board = board = _board(o["ruleset"], o.get(CARRIED))
        self.seat: int = o["seat"]
        self.me: dict[str, Any] = o["players"][self.seat]
        self.turn: int = max(o["turn"], 1)
        self.turns_left: int = board.turns + 1 - self.turn  # this turn included
        self.price: int = board.prices[o["age"] - 1]  # of a building bought now
        self.regions: dict[str, dict[str, Any]] = {r["id"]: r for r in o["regions"]}
        self.n = len(o["players"])

    def goods_counts(self, extra: str | None = None) -> list[int]:
        goods = dict(self.me["goods"])
        if extra:
            goods[extra] = goods.get(extra, 0) + 1
        return list(goods.values())

    def income(self, extra_good: str | None = None, extra_ships: int = 0) -> int:
        ships: int = self.me["ships"]
        return set_income(self.goods_counts(extra_good), ships + extra_ships, self.board.sets)

    def colony_gain(self, region_id: str, units: int = 1) -> float:
        """How much adding ``units`` of mine to a region improves my majority there."""
        r = self.regions[region_id]
        mine = r["units"][self.seat]
        others = max((u for s, u in enumerate(r["units"]) if s != self.seat), default=0)
        after = mine + units
        colony = self.board.colony_min
        value = 0.0
        if r["good_present"] and mine < colony <= after:
            value += 3.0  # the region's good
        if mine <= others < after:
            value += 4.0 if after >= colony else 2.5  # take the lead
        elif after == others:
            value += 1.5  # draw level
        elif after > others:
            value += 0.6 if after - others <= 2 else 0.2  # keep a thin lead safe
        else:
            value += 0.4 if others - after <= 1 else 0.1  # chase second place
        if mine == 0:
            value += 0.5  # presence (Glory, second places)
        return value

    def best_landing(self, units: int = 1) -> float:
        found = [r for r in self.regions.values() if r["discovered"]]
        return max((self.colony_gain(r["id"], units) for r in found), default=0.0)

    def strength(self, colonists: int, captains: int, soldiers: int) -> int:
        """What an expedition of these units counts against the natives."""
        colonist, captain, soldier = self.board.discovery
        return colonist * colonists + captain * captains + soldier * soldiers

    def discovery_strength(self) -> int:
        box = self.me["discovery_box"]
        return self.strength(box["colonists"], box["captains"], box["soldiers"])

    def undiscovered(self) -> list[dict[str, Any]]:
        return [r for r in self.regions.values() if r["token"] == "face_down"]

    # Worth of a box whatever unit goes there: computed once per observation, not per unit
    # (placement offers every unit in every box, and the search asks thousands of times).

    @cached_property
    def best_good_gain(self) -> int:
        now = self.income()
        return max((self.income(g) - now for g in self.o["goods_revealed"]), default=0)

    @cached_property
    def best_building(self) -> float:
        return max(_building_value(self, b) for b in self.o["buildings_revealed"])

    @cached_property
    def ship_gain(self) -> int:
        return self.income(extra_ships=1) - self.income()


def _value_place(s: _Seen, c: Command) -> float:
    box, unit = c["box"], c["unit"]
    money = s.me["money"]
    if box == "initiative":
        space = len(s.o["boxes"]["initiative"]) + 1
        return 1.0 + 0.4 * space + (1.0 if money < 6 else 0.0)
    if box == "dock":
        base = s.best_landing(2 if unit == "missionary" else 1)
        return base + {"merchant": 2.5, "missionary": 1.5, "soldier": 0.3}.get(unit, 0.0)
    if box == "goods":
        return 1.0 + s.best_good_gain * (0.5 + s.turns_left / 4)
    if box == "shipping":
        return _value_shipping(s, unit)
    if box == "buildings":
        if money < s.price or not s.o["buildings_revealed"]:
            return -1.0
        return 2.0 + s.best_building / 3
    if box == "discovery":
        if not s.undiscovered() and not s.o["discovery_deck"]:
            return -2.0
        strength = s.discovery_strength()
        gain = {"captain": 2.5, "soldier": 2.2}.get(unit, 1.2)
        return gain if strength < 5 else gain * 0.3
    if box == "specialists":
        space = c["space"]
        if space == "training":
            return 1.5 if money >= 12 else -0.5
        return {"merchant": 3.0, "missionary": 2.8, "captain": 2.4, "soldier": 2.0}[space] * (
            0.6 + s.turns_left / 10
        )
    if box == "warfare":
        return _value_warfare_slot(s)
    return 0.0


def _value_shipping(s: _Seen, unit: str) -> float:
    if not s.o["ship_in_box"]:
        return -0.5
    values = s.board.shipping
    strength = [0] * s.n
    for entry in s.o["boxes"]["shipping"]:
        strength[entry["seat"]] += values[entry["unit"]]
    mine = strength[s.seat] + values[unit]
    best_other = max((v for seat, v in enumerate(strength) if seat != s.seat), default=0)
    if mine <= best_other:
        return 0.3
    return 1.5 + s.ship_gain * (0.5 + s.turns_left / 4)


def _value_warfare_slot(s: _Seen) -> float:
    for r in s.regions.values():
        mine = r["soldiers"][s.seat]
        if mine and any(u for seat, u in enumerate(r["units"]) if seat != s.seat):
            return 1.5
    return -1.0


def _building_value(s: _Seen, building: str) -> float:
    """A rough worth in VP of a building bought now (turns left matter)."""
    left = s.turns_left
    table: dict[str, float] = {
        "settlers": 0.8 * left,
        "monastery": 1.2 * left,
        "trade_routes": 1.0 * left,
        "training_grounds": 0.6 * left,
        "indentured_servitude": 0.8 * left,
        "conquistador": 0.7 * left,
        "navigator": 0.8 * left,
        "conquest_of_the_inca_empire": 4.0,
        "trading_post": 0.9 * left,
        "new_world_cartography": 7.0,
        "mint": 0.5 * left,
        "indian_allies": 4.0,
        "privateers": 0.4 * left * max(1, s.me["ships"]),
        "ship_yards": 0.8 * left,
        "cathedral": 0.4 * left,
        "taxation": 2.0 + 1.5 * left,
        "university": 5.5,
        "west_indies_company": 0.8 * left,
        "colonization_laws": 0.8 * left,
        "rum_distillery": 0.9 * left * s.me["goods"].get("sugar", 0),
        "marketplace": 1.0 * left,
        "military_academy": 0.6 * left,
        "fortress": 0.6 * left,
        "stable": 0.2 * left,
        "overpopulation": 5.0,
        "militia": 1.0,
        "mercantilism": 1.0 * sum(s.me["goods"].values()) + 1.0,
        "population": 0.5 * sum(r["units"][s.seat] for r in s.regions.values()) + 1.0,
        "navy": 4.0 * s.me["ships"] + 1.0,
        "power": 2.0 * sum(r["soldiers"][s.seat] for r in s.regions.values()),
        "prosperity": 2.0 * (len(s.me["buildings"]) + 1),
        "glory": 2.0 * sum(1 for r in s.regions.values() if r["units"][s.seat]) + 1.0,
        "wealth": max(0.0, (s.me["money"] - s.price) / 5),
        "migration": 1.0,
        "factory": 5.0 + 2.5 * left,
    }
    return table.get(building, 2.0)


def _value_buy(s: _Seen, c: Command) -> float:
    value = _building_value(s, c["building"])
    regions = c.get("regions") or []
    value += sum(0.3 * s.colony_gain(r) for r in regions)
    return value - s.price / 4


def _value_land(s: _Seen, c: Command) -> float:
    return s.colony_gain(c["region"])


def _value_take_good(s: _Seen, c: Command) -> float:
    held: int = s.me["goods"].get(c["good"], 0)
    return s.income(c["good"]) - s.income() + 0.1 * held


def _natives_estimate(s: _Seen, region: str | None) -> int:
    if region is None:
        return 5  # the discovery deck's cards need 3 to 6
    known = s.regions[region]["known_token"]
    return int(known["natives"]) if known else 3


def _value_expedition(s: _Seen, c: Command) -> float:
    colonists: int = c["colonists"]
    captains: int = c["captains"]
    soldiers: int = c["soldiers"]
    strength = s.strength(colonists, captains, soldiers)
    natives = _natives_estimate(s, c["region"])
    if strength < natives:
        return -1.0 - (natives - strength)
    sent = colonists + captains + soldiers
    region_bonus = 0.0 if c["region"] is None else s.colony_gain(c["region"]) * 0.5
    # Win the token (about 5 VP and $2), plunder per soldier, keep spare units for later.
    return 6.0 + 2.5 * soldiers + region_bonus - 0.8 * sent


def _value_pass(s: _Seen, c: Command) -> float:
    return 0.0


def _value_specialist(s: _Seen, c: Command) -> float:
    cost = 0 if s.o["phase"] == "auction_bonus" else s.board.training_cost
    worth = {"merchant": 6.0, "missionary": 5.5, "captain": 4.5, "soldier": 3.5}[c["unit"]]
    money: int = s.me["money"]
    return worth * (0.5 + s.turns_left / 8) - cost - (3.0 if money - cost < 5 else 0.0)


def _value_battle(s: _Seen, c: Command) -> float:
    r = s.regions[c["region"]]
    soldiers: list[int] = r["soldiers"]
    units: list[int] = r["units"]
    mine, theirs = soldiers[s.seat], soldiers[c["opponent"]]
    their_units = units[c["opponent"]]
    kills = min(mine, their_units)
    losses = min(theirs, units[s.seat])
    leads = their_units >= units[s.seat]
    return 1.5 * kills - 1.7 * losses + (1.0 if leads and kills else 0.0) - 0.5


def _value_war(s: _Seen, c: Command) -> float:
    return -3.0  # $10 and battles everywhere: the greedy bot leaves wars to braver levels


def _value_casualties(s: _Seen, c: Command) -> float:
    return float(c["soldiers"])  # soldiers first: they are the ones that kill back


def _value_move(s: _Seen, c: Command) -> float:
    if c["type"] == "move_soldier":
        return s.colony_gain(c["destination"]) - s.colony_gain(c["origin"], -1) - 1.0
    gain = s.colony_gain(c["destination"], c["count"])
    return gain - s.colony_gain(c["origin"], -c["count"]) - 1.0


def _value_bid(s: _Seen, c: Command) -> float:
    amount: int = c["amount"]
    return 1.0 - 0.6 * amount


def _value_university(s: _Seen, c: Command) -> float:
    return 0.5 if c["box"] in ("buildings", "dock") else 0.1


_VALUE: dict[str, Callable[[_Seen, Command], float]] = {
    "place": _value_place,
    "university": _value_university,
    "pass": _value_pass,
    "land": _value_land,
    "take_good": _value_take_good,
    "buy": _value_buy,
    "expedition": _value_expedition,
    "specialist": _value_specialist,
    "battle": _value_battle,
    "war": _value_war,
    "casualties": _value_casualties,
    "move_soldier": _value_move,
    "migrate": _value_move,
    "bid": _value_bid,
}
