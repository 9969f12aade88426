"""The Age of Discovery's greedy policy: a value for every legal command, from what a seat
can see (income, colony majorities, age scoring, building worth for the turns left,
expedition odds from what has been revealed). It looks one decision ahead. The ``greedy``
bot plays its best command from its observation; the ``mcts`` bot orders its search with
it and plays its playouts with it read straight off its sampled states (:func:`state_values`:
the same values, without building a view at every step).

Every figure printed on the board (prices, turns, set values, the training cost, colony
size, unit strengths) is the ruleset's, read once per ruleset: the policy runs thousands of
times a second inside the search. The weights of the heuristic are the policy's own.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from functools import lru_cache
from types import SimpleNamespace
from typing import Any, NamedTuple

from ..ruleset_files import CARRIED
from .income import income_of
from .ruleset import UNITS, Rules
from .state import GameState

Observation = dict[str, Any]
Command = Any
"""One of the game's commands (:mod:`.commands`), or its wire form read by field name: each
value function reads its own kind's fields."""


def greedy_values(observation: Observation, rng: random.Random) -> list[float]:
    """The greedy bot's value of each legal command (a tiny random part breaks ties); the
    ``mcts`` level ranks its root's commands with it."""
    # The wire forms, read by field name like the commands themselves (not parsed again:
    # the view's own legal commands need no checking).
    legal = [SimpleNamespace(**c) for c in observation["legal_commands"]]
    return _values(_Seen.of_view(observation), legal, rng)


def state_values(
    state: GameState, seat: int, legal: Sequence[Command], rng: random.Random
) -> list[float]:
    """:func:`greedy_values` read off a whole state instead of ``seat``'s view: the search
    plays its playouts with it, thousands of times a second, without building a view.
    It reads only what the seat's view shows, and gives the same values for the same
    ``rng``: ``state_values(s, seat, legal_commands(s, seat), r)`` equals
    ``greedy_values(view(s, seat), r)``."""
    return _values(_Seen.of_state(state, seat), legal, rng)


def _values(seen: _Seen, legal: Sequence[Command], rng: random.Random) -> list[float]:
    draw = rng.random
    placed, value_of, by_unit = seen.placed, _VALUE, _BY_UNIT
    out = []
    for c in legal:
        kind = c.type
        if kind == "place":  # :func:`_value_place` inlined: most commands are placements
            box = c.box
            key = (box, c.unit if box in by_unit else c.space)
            value = placed.get(key)
            if value is None:
                value = placed[key] = _place_worth(seen, box, c.unit, c.space)
        else:
            value = value_of[kind](seen, c)
        out.append(value + draw() * 1e-3)
    return out


# --- what the greedy bot reads off its observation (or the search off a state) ---------------


class _Board(NamedTuple):
    """The figures printed on the board that the policy weighs commands with."""

    prices: tuple[int, ...]  # a building's price, by age
    turns: int
    sets: tuple[int, int, int]  # income of any three goods, three alike, four alike
    training_cost: int  # a specialist's price
    colony_min: int  # units that hold a region's good
    shipping: dict[str, int]  # a unit's strength in the shipping box
    discovery: tuple[int, int, int]  # strength of a colonist, a captain, a soldier sent out
    region_index: dict[str, int]


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
        dict(rules.region_index),
    )


class _Seen:
    """What the policy reads, for the seat it decides for: the same fields whether read
    off the seat's view (:meth:`of_view`) or off a whole state (:meth:`of_state`). Region
    tables are indexed like the ruleset's regions; goods and units go by name."""

    # Slots: one is made at every decision of every playout, and a plain instance's dict of
    # this many fields is slow to fill.
    __slots__ = (
        "_best_building",
        "_best_good_gain",
        "_incomes",
        "_landing",
        "_ship_gain",
        "_shipping_strength",
        "board",
        "building_worth",
        "buildings",
        "buildings_revealed",
        "disc",
        "discovered",
        "discovery_deck",
        "face_down",
        "good_present",
        "goods",
        "goods_revealed",
        "initiative",
        "known_natives",
        "money",
        "n",
        "phase",
        "placed",
        "price",
        "seat",
        "ship_in_box",
        "shipping",
        "ships",
        "soldiers",
        "turns_left",
        "units",
    )

    board: _Board
    seat: int
    n: int
    phase: str
    turns_left: int  # this turn included
    price: int  # of a building bought now
    money: int
    goods: dict[str, int]  # held, by good
    ships: int
    buildings: int  # how many the seat owns
    disc: tuple[int, int, int]  # colonists, captains, soldiers in Discovery
    units: list[list[int]]  # region x seat
    soldiers: list[list[int]]
    good_present: list[bool]
    discovered: list[bool]
    face_down: bool  # some undiscovered region's token still lies there
    known_natives: list[int | None]  # a face-down token turned up by a failed expedition
    initiative: int  # units in the Initiative box
    shipping: list[tuple[int, str]]  # (seat, unit) in the Merchant Shipping box
    ship_in_box: bool
    goods_revealed: list[str]
    buildings_revealed: list[str]
    discovery_deck: int

    @classmethod
    def of_view(cls, o: Observation) -> _Seen:
        s = cls()
        s._common(
            _board(o["ruleset"], o.get(CARRIED)),
            o["seat"],
            len(o["players"]),
            o["phase"],
            o["turn"],
        )
        s.price = s.board.prices[o["age"] - 1]
        me = o["players"][s.seat]
        s.money, s.goods, s.ships = me["money"], me["goods"], me["ships"]
        s.buildings = len(me["buildings"])
        box = me["discovery_box"]
        s.disc = (box["colonists"], box["captains"], box["soldiers"])
        regions = o["regions"]
        s.units = [r["units"] for r in regions]
        s.soldiers = [r["soldiers"] for r in regions]
        s.good_present = [r["good_present"] for r in regions]
        s.discovered = [r["discovered"] for r in regions]
        s.face_down = any(r["token"] == "face_down" for r in regions)
        s.known_natives = [
            None if r["known_token"] is None else r["known_token"]["natives"] for r in regions
        ]
        boxes = o["boxes"]
        s.initiative = len(boxes["initiative"])
        s.shipping = [(e["seat"], e["unit"]) for e in boxes["shipping"]]
        s.ship_in_box = o["ship_in_box"]
        s.goods_revealed = o["goods_revealed"]
        s.buildings_revealed = o["buildings_revealed"]
        s.discovery_deck = o["discovery_deck"]
        return s

    @classmethod
    def of_state(cls, state: GameState, seat: int) -> _Seen:
        s = cls()
        rules = state.rules
        s._common(_board(rules.ruleset.name, rules.file), seat, state.n, state.phase, state.turn)
        s.price = s.board.prices[rules.age_of_turn(max(state.turn, 1)) - 1]
        s.money, s.ships = state.money[seat], state.ships[seat]
        s.buildings = len(state.owned[seat])
        colonists, captains, soldiers = state.disc[seat]
        s.disc = (colonists, captains, soldiers)
        s.units, s.soldiers = state.units, state.soldiers  # read only
        s.good_present, s.discovered = state.region_good, state.discovered
        token_on = state.token_on
        s.face_down = max(token_on) >= 0
        if True in state.token_known:
            tokens = rules.tokens
            s.known_natives = [
                tokens[t][2] if t >= 0 and known else None
                for t, known in zip(token_on, state.token_known, strict=True)
            ]
        else:
            s.known_natives = [None] * len(token_on)
        s.initiative = len(state.initiative)
        s.shipping = [(owner, UNITS[u]) for owner, u in state.shipping]
        s.ship_in_box = bool(state.ship_in_box)
        names = rules.goods
        s.goods = {names[g]: c for g, c in enumerate(state.goods[seat]) if c}
        s.goods_revealed = [names[g] for g in state.goods_revealed]
        s.buildings_revealed = [rules.building_ids[b] for b in state.revealed_buildings]
        s.discovery_deck = len(state.deck)
        return s

    def _common(self, board: _Board, seat: int, n: int, phase: str, turn: int) -> None:
        self._shipping_strength: tuple[int, int] | None = None
        self.board, self.seat, self.n, self.phase = board, seat, n, phase
        self.turns_left = board.turns + 1 - max(turn, 1)
        self._landing: dict[int, float] = {}
        self._incomes: dict[tuple[str | None, int], int] = {}
        self._best_good_gain: int | None = None
        self._best_building: float | None = None
        self._ship_gain: int | None = None
        self.placed: dict[tuple[str, str | None], float] = {}  # see _value_place
        self.building_worth: dict[str, float] | None = None  # see _building_value

    def income(self, extra_good: str | None = None, extra_ships: int = 0) -> int:
        """What my sets would pay with one more good or ships (once each per decision)."""
        key = (extra_good, extra_ships)
        paid = self._incomes.get(key)
        if paid is None:
            goods = self.goods
            counts = tuple(goods.values())  # sets pay by counts alone, in any order
            if extra_good:
                if extra_good in goods:
                    counts = tuple(c + (g == extra_good) for g, c in goods.items())
                else:
                    counts += (1,)
            ships = self.ships + extra_ships
            paid = self._incomes[key] = income_of(counts, ships, self.board.sets)
        return paid

    def colony_gain(self, region_id: str, units: int = 1) -> float:
        """How much adding ``units`` of mine to a region improves my majority there."""
        return self.gain(self.board.region_index[region_id], units)

    def gain(self, region: int, units: int = 1) -> float:
        """:meth:`colony_gain` by the region's index."""
        here, seat = self.units[region], self.seat
        mine = here[seat]
        top = max(here)
        if mine < top or here.count(top) > 1:
            others = top  # the usual case: no need to leave my own count out
        else:
            others = max(here[:seat] + here[seat + 1 :], default=0)
        after = mine + units
        colony = self.board.colony_min
        value = 0.0
        if self.good_present[region] and mine < colony <= after:
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
        """The best :meth:`gain` of landing ``units`` in a discovered region (once per
        count: the Dock is offered for every unit)."""
        best = self._landing.get(units)
        if best is None:
            found = [r for r, yes in enumerate(self.discovered) if yes]
            best = self._landing[units] = max((self.gain(r, units) for r in found), default=0.0)
        return best

    def strength(self, colonists: int, captains: int, soldiers: int) -> int:
        """What an expedition of these units counts against the natives."""
        colonist, captain, soldier = self.board.discovery
        return colonist * colonists + captain * captains + soldier * soldiers

    def discovery_strength(self) -> int:
        return self.strength(*self.disc)

    # Worth of a box whatever unit goes there: computed once per observation, not per unit
    # (placement offers every unit in every box, and the search asks thousands of times).

    def best_good_gain(self) -> int:
        if self._best_good_gain is None:
            now = self.income()
            self._best_good_gain = max(
                (self.income(g) - now for g in self.goods_revealed), default=0
            )
        return self._best_good_gain

    def best_building(self) -> float:
        if self._best_building is None:
            self._best_building = max(_building_value(self, b) for b in self.buildings_revealed)
        return self._best_building

    def ship_gain(self) -> int:
        if self._ship_gain is None:
            self._ship_gain = self.income(extra_ships=1) - self.income()
        return self._ship_gain


# The policy's weights by unit (module constants: read at every placement of a playout).
_LANDING_BONUS = {"merchant": 2.5, "missionary": 1.5, "soldier": 0.3}  # sent by the Dock
_EXPLORER = {"captain": 2.5, "soldier": 2.2}  # sent to Discovery (others 1.2)
_SPECIALIST_SPACE = {"merchant": 3.0, "missionary": 2.8, "captain": 2.4, "soldier": 2.0}
_SPECIALIST = {"merchant": 6.0, "missionary": 5.5, "captain": 4.5, "soldier": 3.5}

_BY_UNIT = frozenset({"dock", "shipping", "discovery"})  # the boxes where the unit matters


def _value_place(s: _Seen, c: Command) -> float:
    """:func:`_place_worth`, once per box (and unit, where it matters): placement offers
    every available unit in every open box."""
    box = c.box
    key = (box, c.unit if box in _BY_UNIT else c.space)
    value = s.placed.get(key)
    if value is None:
        value = s.placed[key] = _place_worth(s, box, c.unit, c.space)
    return value


def _place_worth(s: _Seen, box: str, unit: str, space: str | None) -> float:
    money = s.money
    if box == "initiative":
        return 1.0 + 0.4 * (s.initiative + 1) + (1.0 if money < 6 else 0.0)
    if box == "dock":
        base = s.best_landing(2 if unit == "missionary" else 1)
        return base + _LANDING_BONUS.get(unit, 0.0)
    if box == "goods":
        return 1.0 + s.best_good_gain() * (0.5 + s.turns_left / 4)
    if box == "shipping":
        return _value_shipping(s, unit)
    if box == "buildings":
        if money < s.price or not s.buildings_revealed:
            return -1.0
        return 2.0 + s.best_building() / 3
    if box == "discovery":
        if not s.face_down and not s.discovery_deck:
            return -2.0
        strength = s.discovery_strength()
        gain = _EXPLORER.get(unit, 1.2)
        return gain if strength < 5 else gain * 0.3
    if box == "specialists":
        assert space is not None
        if space == "training":
            return 1.5 if money >= 12 else -0.5
        return _SPECIALIST_SPACE[space] * (0.6 + s.turns_left / 10)
    if box == "warfare":
        return _value_warfare_slot(s)
    return 0.0


def _value_shipping(s: _Seen, unit: str) -> float:
    if not s.ship_in_box:
        return -0.5
    values = s.board.shipping
    if s._shipping_strength is None:  # once per decision: every unit may be offered
        strength = [0] * s.n
        for seat, placed in s.shipping:
            strength[seat] += values[placed]
        seat = s.seat
        best_other = max(strength[:seat] + strength[seat + 1 :], default=0)
        s._shipping_strength = (strength[seat], best_other)
    held, best_other = s._shipping_strength
    mine = held + values[unit]
    if mine <= best_other:
        return 0.3
    return 1.5 + s.ship_gain() * (0.5 + s.turns_left / 4)


def _value_warfare_slot(s: _Seen) -> float:
    for here, soldiers in zip(s.units, s.soldiers, strict=True):
        if soldiers[s.seat] and any(u for seat, u in enumerate(here) if seat != s.seat):
            return 1.5
    return -1.0


def _building_value(s: _Seen, building: str) -> float:
    """A rough worth in VP of a building bought now (turns left matter): each building
    asked about is worked out once per decision (the policy asks about the few on offer)."""
    worth = s.building_worth
    if worth is None:
        worth = s.building_worth = {}
    value = worth.get(building)
    if value is None:
        make = _WORTH.get(building)
        value = worth[building] = 2.0 if make is None else make(s, s.turns_left)
    return value


_WORTH: dict[str, Callable[[_Seen, int], float]] = {
    "settlers": lambda s, left: 0.8 * left,
    "monastery": lambda s, left: 1.2 * left,
    "trade_routes": lambda s, left: 1.0 * left,
    "training_grounds": lambda s, left: 0.6 * left,
    "indentured_servitude": lambda s, left: 0.8 * left,
    "conquistador": lambda s, left: 0.7 * left,
    "navigator": lambda s, left: 0.8 * left,
    "conquest_of_the_inca_empire": lambda s, left: 4.0,
    "trading_post": lambda s, left: 0.9 * left,
    "new_world_cartography": lambda s, left: 7.0,
    "mint": lambda s, left: 0.5 * left,
    "indian_allies": lambda s, left: 4.0,
    "privateers": lambda s, left: 0.4 * left * max(1, s.ships),
    "ship_yards": lambda s, left: 0.8 * left,
    "cathedral": lambda s, left: 0.4 * left,
    "taxation": lambda s, left: 2.0 + 1.5 * left,
    "university": lambda s, left: 5.5,
    "west_indies_company": lambda s, left: 0.8 * left,
    "colonization_laws": lambda s, left: 0.8 * left,
    "rum_distillery": lambda s, left: 0.9 * left * s.goods.get("sugar", 0),
    "marketplace": lambda s, left: 1.0 * left,
    "military_academy": lambda s, left: 0.6 * left,
    "fortress": lambda s, left: 0.6 * left,
    "stable": lambda s, left: 0.2 * left,
    "overpopulation": lambda s, left: 5.0,
    "militia": lambda s, left: 1.0,
    "mercantilism": lambda s, left: 1.0 * sum(s.goods.values()) + 1.0,
    "population": lambda s, left: 0.5 * sum(here[s.seat] for here in s.units) + 1.0,
    "navy": lambda s, left: 4.0 * s.ships + 1.0,
    "power": lambda s, left: 2.0 * sum(here[s.seat] for here in s.soldiers),
    "prosperity": lambda s, left: 2.0 * (s.buildings + 1),
    "glory": lambda s, left: 2.0 * sum(1 for here in s.units if here[s.seat]) + 1.0,
    "wealth": lambda s, left: max(0.0, (s.money - s.price) / 5),
    "migration": lambda s, left: 1.0,
    "factory": lambda s, left: 5.0 + 2.5 * left,
}
"""Each building's worth to the seat, from the turns ``left`` (this one included)."""


def _value_buy(s: _Seen, c: Command) -> float:
    value = _building_value(s, c.building)
    value += sum(0.3 * s.colony_gain(r) for r in c.regions)
    return value - s.price / 4


def _value_land(s: _Seen, c: Command) -> float:
    return s.colony_gain(c.region)


def _value_take_good(s: _Seen, c: Command) -> float:
    held = s.goods.get(c.good, 0)
    return s.income(c.good) - s.income() + 0.1 * held


def _natives_estimate(s: _Seen, region: str | None) -> int:
    if region is None:
        return 5  # the discovery deck's cards need 3 to 6
    known = s.known_natives[s.board.region_index[region]]
    return 3 if known is None else known


def _value_expedition(s: _Seen, c: Command) -> float:
    colonists: int = c.colonists
    captains: int = c.captains
    soldiers: int = c.soldiers
    strength = s.strength(colonists, captains, soldiers)
    natives = _natives_estimate(s, c.region)
    if strength < natives:
        return -1.0 - (natives - strength)
    sent = colonists + captains + soldiers
    region_bonus = 0.0 if c.region is None else s.colony_gain(c.region) * 0.5
    # Win the token (about 5 VP and $2), plunder per soldier, keep spare units for later.
    return 6.0 + 2.5 * soldiers + region_bonus - 0.8 * sent


def _value_pass(s: _Seen, c: Command) -> float:
    return 0.0


def _value_specialist(s: _Seen, c: Command) -> float:
    cost = 0 if s.phase == "auction_bonus" else s.board.training_cost
    worth = _SPECIALIST[c.unit]
    money = s.money
    return worth * (0.5 + s.turns_left / 8) - cost - (3.0 if money - cost < 5 else 0.0)


def _value_battle(s: _Seen, c: Command) -> float:
    r = s.board.region_index[c.region]
    soldiers, units = s.soldiers[r], s.units[r]
    opponent: int = c.opponent
    mine, theirs = soldiers[s.seat], soldiers[opponent]
    their_units = units[opponent]
    kills = min(mine, their_units)
    losses = min(theirs, units[s.seat])
    leads = their_units >= units[s.seat]
    return 1.5 * kills - 1.7 * losses + (1.0 if leads and kills else 0.0) - 0.5


def _value_war(s: _Seen, c: Command) -> float:
    return -3.0  # $10 and battles everywhere: the greedy bot leaves wars to braver levels


def _value_casualties(s: _Seen, c: Command) -> float:
    return float(c.soldiers)  # soldiers first: they are the ones that kill back


def _value_move(s: _Seen, c: Command) -> float:
    if c.type == "move_soldier":
        return s.colony_gain(c.destination) - s.colony_gain(c.origin, -1) - 1.0
    gain = s.colony_gain(c.destination, c.count)
    return gain - s.colony_gain(c.origin, -c.count) - 1.0


def _value_bid(s: _Seen, c: Command) -> float:
    amount: int = c.amount
    return 1.0 - 0.6 * amount


def _value_university(s: _Seen, c: Command) -> float:
    return 0.5 if c.box in ("buildings", "dock") else 0.1


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
