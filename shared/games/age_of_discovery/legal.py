"""Which commands are legal: every command a seat may send for its pending decision."""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache
from itertools import combinations_with_replacement
from operator import itemgetter
from typing import Any, TypeVar

from ..commands import Command
from .commands import (
    SPECIALIST_SPACES,
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
from .decisions import _casualty_ranges, pending
from .emit import _has
from .ruleset import SPECIALISTS, UNITS
from .state import GameState

C = TypeVar("C", bound=Command)


def legal_commands(state: GameState, seat: int) -> list[Command]:
    """Every command ``seat`` may send now (empty when it has nothing to decide)."""
    if state.phase == "placement":
        on_turn = state.to_place and state.queue[state.cursor] == seat
        return _legal_place(state, seat) if on_turn else []
    for decision in pending(state):
        if decision.seat == seat:
            return LEGAL[decision.kind](state, seat)
    return []


# Every place a unit can go: a box, and for the Specialists box its space.
SLOTS: tuple[tuple[str, str | None], ...] = (
    ("initiative", None),
    ("dock", None),
    ("goods", None),
    ("shipping", None),
    ("buildings", None),
    ("discovery", None),
    *(("specialists", space) for space in SPECIALIST_SPACES),
    ("warfare", None),
)
SLOT_OF = {slot: i for i, slot in enumerate(SLOTS)}


@lru_cache(maxsize=64)
def _place_table(seat: int) -> tuple[tuple[Place, ...], ...]:
    """Every Place command of a seat, by unit then slot: built once, shared (immutable)."""
    return tuple(tuple(Place(seat, unit, box, space) for box, space in SLOTS) for unit in UNITS)


def _slot_open(s: GameState, seat: int, slot: int) -> bool:
    """May ``seat`` place a unit in SLOTS[slot] now? Boxes fill left to right."""
    initiative, dock, trade, buildings, warfare = s.rules.spaces(s.n)
    if slot == 3 or slot == 5:  # Merchant Shipping and Discovery are unlimited
        return True
    if slot == 0:
        return len(s.initiative) < initiative and seat not in s.initiative
    if slot == 1:
        return len(s.dock) < dock
    if slot == 2:
        return len(s.trade) < min(trade, len(s.goods_revealed))
    if slot == 4:
        return len(s.bbox) < min(buildings, len(s.revealed_buildings))
    if slot == 11:
        return len(s.warfare) < warfare
    return s.specialists[slot - 6] < 0


def _open_slots(s: GameState, seat: int) -> list[int]:
    """Every slot where ``_slot_open`` holds, computed in one pass (the search's hot path)."""
    initiative, dock, trade, buildings, warfare = s.rules.spaces(s.n)
    out = [3, 5]
    if len(s.initiative) < initiative and seat not in s.initiative:
        out.append(0)
    if len(s.dock) < dock:
        out.append(1)
    if len(s.trade) < trade and len(s.trade) < len(s.goods_revealed):
        out.append(2)
    if len(s.bbox) < buildings and len(s.bbox) < len(s.revealed_buildings):
        out.append(4)
    captain, merchant, missionary, soldier, training = s.specialists  # SPECIALIST_SPACES
    if captain < 0:
        out.append(6)
    if merchant < 0:
        out.append(7)
    if missionary < 0:
        out.append(8)
    if soldier < 0:
        out.append(9)
    if training < 0:
        out.append(10)
    if len(s.warfare) < warfare:
        out.append(11)
    return out


def _legal_place(s: GameState, seat: int) -> list[Command]:
    pick = itemgetter(*_open_slots(s, seat))  # two slots at least: a tuple of commands
    table = _place_table(seat)
    out: list[Command] = []
    for u, count in enumerate(s.avail[seat]):
        if count:
            out += pick(table[u])
    if not s.university_used[seat] and _has(s, seat, "university") is not None:
        out += [
            _made(UseUniversity, seat, box, space) for box, space, _ in _university_moves(s, seat)
        ]
    return out


def _university_moves(s: GameState, seat: int) -> list[tuple[str, int | None, int]]:
    """(box, from space, to space) for every University move available to ``seat``."""
    one_forward = s.rules.options["university"] == "one_forward"
    out: list[tuple[str, int | None, int]] = []
    rows: list[tuple[str, list[Any]]] = [
        ("dock", [e[0] for e in s.dock]),
        ("initiative", s.initiative),
        ("buildings", s.bbox),
    ]
    for box, row in rows:
        for i, owner in enumerate(row):
            if owner == seat and i > 0:
                out.append((box, i, i - 1 if one_forward else 0))
    position = s.order.index(seat)
    if position > 0:
        out.append(("turn_order", None, position - 1 if one_forward else 0))
    return out


def _discovered(s: GameState) -> list[str]:
    regions = s.rules.regions
    return [regions[r] for r, found in enumerate(s.discovered) if found]


@lru_cache(maxsize=8192)
def _made(kind: type[C], *args: Any) -> C:
    """Commands are immutable: each legal one is made once and reused (random play and the
    search's playouts list them at every decision, and a frozen dataclass is slow to build)."""
    return kind(*args)


def _legal_land(s: GameState, seat: int) -> list[Command]:
    return [_made(Land, seat, r) for r in _discovered(s)]


def _legal_take_good(s: GameState, seat: int) -> list[Command]:
    goods = s.rules.goods
    return [_made(TakeGood, seat, goods[g]) for g in sorted(set(s.goods_revealed))]


def _price(s: GameState) -> int:
    return s.rules.ruleset.building_prices[s.rules.age_of_turn(s.turn) - 1]


def _legal_buy(s: GameState, seat: int) -> list[Command]:
    out: list[Command] = [_made(Pass, seat)]
    if s.money[seat] < _price(s):
        return out
    buildings = s.rules.buildings
    for b in sorted(set(s.revealed_buildings)):
        building = buildings[b]
        out += [
            _made(BuyBuilding, seat, building.id, regions) for regions in _buy_choices(s, seat, b)
        ]
    return out


def _buy_choices(s: GameState, seat: int, b: int) -> list[tuple[str, ...]]:
    """The immediate choices a building needs when bought (region tuples)."""
    effects = s.rules.buildings[b].effects
    regions = s.rules.regions
    targets: list[tuple[str, ...]]
    if "free_discovery" in effects:
        targets = [(regions[r],) for r, t in enumerate(s.token_on) if t >= 0]
        return targets or [()]
    if "indian_allies" in effects:
        targets = [(regions[r],) for r in range(len(regions)) if s.units[r][seat]]
        return targets or [()]
    if "place_colonists" in effects:
        count = effects["place_colonists"]["count"]
        return list(combinations_with_replacement(_discovered(s), count))
    return [()]


def _expedition_targets(s: GameState) -> list[str | None]:
    regions = s.rules.regions
    targets: list[str | None] = [regions[r] for r, t in enumerate(s.token_on) if t >= 0]
    if not targets and all(s.discovered) and s.deck:
        targets = [None]
    return targets


def _legal_expedition(s: GameState, seat: int) -> list[Command]:
    colonists, captains, soldiers = s.disc[seat]
    targets = tuple(_expedition_targets(s))
    return list(_expeditions(seat, colonists, captains, soldiers, targets))


@lru_cache(maxsize=4096)
def _expeditions(
    seat: int, colonists: int, captains: int, soldiers: int, targets: tuple[str | None, ...]
) -> tuple[Command, ...]:
    """Pass, then every expedition of these units to these targets: listed once per case."""
    out: list[Command] = [_made(Pass, seat)]
    for c in range(colonists + 1):
        for k in range(captains + 1):
            for m in range(soldiers + 1):
                if c or k or m:
                    out += [_made(Expedition, seat, c, k, m, t) for t in targets]
    return tuple(out)


def _legal_specialist(s: GameState, seat: int) -> list[Command]:
    specialists = [_made(TakeSpecialist, seat, UNITS[u]) for u in SPECIALISTS]
    if s.phase == "auction_bonus":
        return list(specialists)
    if s.money[seat] < s.rules.ruleset.values.training_cost:
        return [_made(Pass, seat)]
    return [_made(Pass, seat), *specialists]


def _war_regions(s: GameState, a: int, d: int) -> list[int]:
    units, soldiers = s.units, s.soldiers
    return [
        r
        for r in range(len(units))
        if units[r][a] and units[r][d] and (soldiers[r][a] or soldiers[r][d])
    ]


def _legal_conflict(s: GameState, seat: int) -> list[Command]:
    out: list[Command] = [_made(Pass, seat)]
    regions = s.rules.regions
    for r, here in enumerate(s.units):
        if here[seat]:
            out += [
                _made(Battle, seat, regions[r], other)
                for other in range(s.n)
                if other != seat and here[other]
            ]
    if s.money[seat] >= s.rules.ruleset.values.war_cost:
        out += [
            _made(War, seat, other)
            for other in range(s.n)
            if other != seat and _war_regions(s, seat, other)
        ]
    return out


def _legal_casualties(s: GameState, seat: int) -> list[Command]:
    lo, hi = _casualty_ranges(s)[seat]
    return [_made(Casualties, seat, k) for k in range(lo, hi + 1)]


def _legal_move(s: GameState, seat: int) -> list[Command]:
    out: list[Command] = [_made(Pass, seat)]
    regions = s.rules.regions
    if s.queue[s.cursor][1] == "stable":
        for r, here in enumerate(s.soldiers):
            if here[seat]:
                out += [
                    _made(MoveSoldier, seat, regions[r], regions[t])
                    for t in sorted(s.rules.adjacent[r])
                    if s.discovered[t]
                ]
        return out
    limit = _has(s, seat, "migration")
    assert limit is not None
    found = [t for t, f in enumerate(s.discovered) if f]
    for r in range(len(regions)):
        colonists = s.units[r][seat] - s.soldiers[r][seat]
        for count in range(1, min(colonists, limit["colonists"]) + 1):
            out += [_made(Migrate, seat, regions[r], regions[t], count) for t in found if t != r]
    return out


def _legal_bid(s: GameState, seat: int) -> list[Command]:
    return [_made(Pass, seat)] + [
        _made(Bid, seat, a) for a in range(s.bid_high + 1, s.money[seat] + 1)
    ]


LEGAL: dict[str, Callable[[GameState, int], list[Command]]] = {
    "bid": _legal_bid,
    "place": _legal_place,
    "land": _legal_land,
    "take_good": _legal_take_good,
    "buy": _legal_buy,
    "expedition": _legal_expedition,
    "specialist": _legal_specialist,
    "conflict": _legal_conflict,
    "casualties": _legal_casualties,
    "move": _legal_move,
}
