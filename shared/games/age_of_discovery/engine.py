"""The rules: who decides what, which commands are legal, and what a command causes.

``decide`` turns a command into events and then plays every automatic step (paying the
Initiative box, awarding the ship, income, age scoring, the end-of-turn refresh, forced
choices) until a real decision is pending or the game is over. Events are applied to a
private copy as they are made, so each step sees the state its predecessors left.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import lru_cache
from itertools import combinations_with_replacement
from operator import itemgetter
from typing import Any, TypeVar

from ..commands import Command
from ..protocol import PUBLIC, Decision, Event, RuleViolation, Visibility
from ..ruleset_files import CARRIED
from . import rng
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
from .evolve import HANDLERS, UNIT
from .income import set_income
from .ruleset import (
    MERCHANT,
    MISSIONARY,
    SPECIALISTS,
    UNITS,
    CompiledBuilding,
    Rules,
    Ruleset,
    compile_rules,
)
from .scoring import colony_vp, score
from .state import GameState, blank_state

C = TypeVar("C", bound=Command)

# What each decision kind is called in ``pending`` and which commands answer it.
KIND = {
    "auction": "bid",
    "auction_bonus": "specialist",
    "placement": "place",
    "dock": "land",
    "goods": "take_good",
    "buildings": "buy",
    "discovery": "expedition",
    "training": "specialist",
    "warfare": "conflict",
    "upkeep": "move",
}
ANSWERS: dict[str, tuple[type[Command], ...]] = {
    "bid": (Bid, Pass),
    "place": (Place, UseUniversity),
    "land": (Land,),
    "take_good": (TakeGood,),
    "buy": (BuyBuilding, Pass),
    "expedition": (Expedition, Pass),
    "specialist": (TakeSpecialist, Pass),
    "conflict": (Battle, War, Pass),
    "casualties": (Casualties,),
    "move": (MoveSoldier, Migrate, Pass),
}


def _emit(
    s: GameState,
    out: list[Event],
    type_: str,
    data: dict[str, Any],
    secret: dict[str, Any] | None = None,
    visibility: Visibility = PUBLIC,
) -> None:
    """Make an event and apply it (:func:`.evolve.apply`, its handler called directly: the
    hot path of simulation and search)."""
    HANDLERS[type_](s, data, secret)
    s.version += 1
    out.append(_new_event(Event, (type_, data, secret, visibility)))


_new_event = tuple.__new__
"""``Event(...)`` without the named tuple's Python-level ``__new__``: every event is made here."""


# --- new game --------------------------------------------------------------------------------


def new_game(
    ruleset: Ruleset | Rules,
    options: dict[str, Any] | None,
    players: Sequence[str] | int,
    seed: int,
) -> tuple[GameState, list[Event]]:
    """Deal a new game: the initial state and the setup events that produce it."""
    rules = ruleset if isinstance(ruleset, Rules) else compile_rules(ruleset, options)
    names = [f"seat {i}" for i in range(players)] if isinstance(players, int) else list(players)
    r = rules.ruleset
    if not r.min_players <= len(names) <= r.max_players:
        raise RuleViolation(
            "bad_player_count", f"{r.title} takes {r.min_players} to {r.max_players} players"
        )
    s = blank_state(rules, len(names))
    out: list[Event] = []
    _emit(
        s,
        out,
        "game_created",
        {
            "game": "age_of_discovery",
            "ruleset": r.name,
            "options": dict(rules.options),
            "players": names,
            **({} if rules.file is None else {CARRIED: rules.file}),
        },
        secret={"seed": seed},
    )
    _deal(s, out, rng.seed_state(seed))
    if rules.options["starting_order"] == "auction":
        _emit(s, out, "phase", {"phase": "auction", "queue": list(range(s.n))})
    else:
        state, order = rng.shuffled(s.rng, list(range(s.n)))
        _emit(s, out, "turn_order", {"order": order}, secret={"rng": state})
        for position, seat in enumerate(order):
            if amount := r.compensation[position]:
                _emit(s, out, "money", {"seat": seat, "amount": amount, "reason": "compensation"})
        _start_turn(s, out, 1)
    _advance(s, out)
    return s, out


def _deal(s: GameState, out: list[Event], state: int) -> None:
    rules = s.rules
    r = rules.ruleset
    state, tokens = rng.shuffled(state, list(range(len(rules.tokens))))
    token_on = [-1] * len(rules.regions)
    for region, discovered in enumerate(rules.start_discovered):
        if not discovered:
            token_on[region] = tokens.pop()
    pile = [g for g, count in enumerate(rules.good_counts) for _ in range(count)]
    for g in rules.region_good:
        pile.remove(g)
    state, pile = rng.shuffled(state, pile)
    revealed = [pile.pop() for _ in range(min(r.boxes.revealed_goods, len(pile)))]
    piles = []
    for age_pile in rules.piles:
        state, shuffled = rng.shuffled(state, list(age_pile))
        piles.append(shuffled)
    shown = [piles[0].pop() for _ in range(min(r.boxes.revealed_buildings, len(piles[0])))]
    state, deck = rng.shuffled(state, list(range(len(rules.cards))))
    _emit(
        s,
        out,
        "setup",
        {
            "goods_revealed": [rules.goods[g] for g in revealed],
            "buildings_revealed": [rules.buildings[b].id for b in shown],
        },
        secret={
            "token_on": token_on,
            "unused_tokens": tokens,
            "goods_pile": pile,
            "piles": piles,
            "deck": deck,
            "rng": state,
        },
    )
    for seat in range(s.n):
        _emit(s, out, "money", {"seat": seat, "amount": r.starting_money, "reason": "start"})


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


def _owned(s: GameState, seat: int) -> list[CompiledBuilding]:
    buildings = s.rules.buildings
    return [buildings[b] for b in s.owned[seat]]


def _has(s: GameState, seat: int, effect: str) -> dict[str, Any] | None:
    buildings = s.rules.buildings
    for b in s.owned[seat]:
        e: dict[str, Any] | None = buildings[b].effects.get(effect)
        if e is not None:
            return e
    return None


# --- pending ---------------------------------------------------------------------------------


def pending(state: GameState) -> tuple[Decision, ...]:
    """Who must decide what now: usually one seat; both sides choosing casualties at once."""
    phase = state.phase
    if phase == "placement":
        return _decisions(state.queue[state.cursor], "place") if state.to_place else ()
    if phase == "warfare" and state.battles:
        return tuple(_decisions(seat, "casualties")[0] for seat in _battle_choosers(state))
    kind = KIND.get(phase)
    if kind is None:
        return ()
    if phase == "auction":
        return _decisions(state.queue[state.cursor], kind) if len(state.queue) > 1 else ()
    if state.cursor >= len(state.queue):
        return ()
    entry = state.queue[state.cursor]
    return _decisions(entry[0] if isinstance(entry, tuple) else entry, kind)


@lru_cache(maxsize=256)
def _decisions(seat: int, kind: str) -> tuple[Decision, ...]:
    """A seat's one decision, made once per (seat, kind): decisions are immutable, and
    ``pending`` is asked several times per command."""
    return (Decision(seat, kind),)


def _battle_choosers(s: GameState) -> list[int]:
    """Seats with a real casualty choice in the current battle that have not chosen yet."""
    out = []
    for seat, (lo, hi) in _casualty_ranges(s).items():
        if hi > lo and seat not in s.choices:
            out.append(seat)
    return out


def _casualty_ranges(s: GameState) -> dict[int, tuple[int, int]]:
    """For each side: the range of how many enemy soldiers its kills may take."""
    region, a, d = s.battles[0], s.attacker, s.defender
    units, soldiers = s.units[region], s.soldiers[region]
    kills = {a: min(soldiers[a], units[d]), d: min(soldiers[d] + _militia(s, d), units[a])}
    out = {}
    for seat, enemy in ((a, d), (d, a)):
        k, enemy_soldiers = kills[seat], soldiers[enemy]
        enemy_colonists = units[enemy] - enemy_soldiers
        out[seat] = (max(0, k - enemy_colonists), min(k, enemy_soldiers))
    return out


def _militia(s: GameState, seat: int) -> int:
    militia = _has(s, seat, "militia")
    return militia["soldiers"] if militia else 0


# --- legal commands --------------------------------------------------------------------------


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


# --- decide ----------------------------------------------------------------------------------


def decide(state: GameState, command: Command) -> list[Event]:
    """The events ``command`` causes, up to the next real decision.

    Raises :class:`RuleViolation` (with a code and a reason) for any command the rules
    refuse; ``state`` is never changed.
    """
    return decide_into(state.copy(), command)


def decide_into(s: GameState, command: Command, *, trusted: bool = False) -> list[Event]:
    """:func:`decide` on a private state, which it leaves advanced past the events.

    The fast path for search and simulation; on a violation ``s`` is unchanged. ``trusted``
    (:meth:`~shared.games.api.Game.decide_into`): ``command`` was taken from
    ``legal_commands(s, command.seat)`` in this very state, so it is not checked again.
    """
    decision = _decision_of(s, command.seat) if trusted else _check(s, command)
    out: list[Event] = []
    PERFORM[type(command)](s, command, decision, out)
    _advance(s, out)
    return out


def _decision_of(s: GameState, seat: int) -> Decision:
    """The pending decision of ``seat``, which has one (a trusted command's)."""
    if s.phase == "placement":
        return _decisions(seat, "place")[0]
    for d in pending(s):
        if d.seat == seat:
            return d
    raise AssertionError(f"a trusted command of seat {seat}, which has nothing to decide")


def _check(s: GameState, command: Command) -> Decision:
    if not isinstance(command, Command):
        raise RuleViolation("malformed", "not a command")
    if s.phase == "over":
        raise RuleViolation("game_over", "the game is over")
    seat = command.seat
    if not isinstance(seat, int) or not 0 <= seat < s.n:
        named = "the command names no seat" if seat is None else f"there is no seat {seat!r}"
        raise RuleViolation("unknown_seat", f"{named}: this game has seats 0 to {s.n - 1}")
    decisions = pending(s)
    decision = next((d for d in decisions if d.seat == seat), None)
    if decision is None:
        waiting = ", ".join(f"seat {d.seat} ({d.kind})" for d in decisions)
        raise RuleViolation(
            "out_of_turn", f"seat {seat} has nothing to decide; waiting for {waiting}"
        )
    if not isinstance(command, ANSWERS[decision.kind]):
        expected = ", ".join(c.type for c in ANSWERS[decision.kind])
        raise RuleViolation(
            "wrong_command", f"seat {seat} must decide '{decision.kind}': send one of {expected}"
        )
    CHECKS.get(type(command), _check_listed)(s, command)
    return decision


def _check_listed(s: GameState, command: Command) -> None:
    if command not in legal_commands(s, command.seat):
        raise RuleViolation("illegal", f"{_describe(command)} is not allowed here")


def _describe(command: Command) -> str:
    """A command for a message: its type and the fields it sets (an unset optional field
    is left out rather than shown as Python's None)."""
    fields = {k: v for k, v in command.to_dict().items() if k not in ("type", "seat")}
    shown = ", ".join(f"{k} {v!r}" for k, v in fields.items() if v is not None)
    return f"{command.type} ({shown})" if shown else command.type


def _check_place(s: GameState, c: Command) -> None:
    assert isinstance(c, Place)
    unit = UNIT.get(c.unit)
    if unit is None:
        raise RuleViolation("unknown_unit", f"unknown unit {c.unit!r}")
    if not s.avail[c.seat][unit]:
        raise RuleViolation("no_unit", f"seat {c.seat} has no {c.unit} left to place")
    if c.box == "specialists":
        if c.space not in SPECIALIST_SPACES:
            named = "needs a space" if c.space is None else f"has no space {c.space!r}"
            spaces = ", ".join(SPECIALIST_SPACES)
            raise RuleViolation("illegal_space", f"the Specialists box {named}: one of {spaces}")
    elif c.space is not None:
        raise RuleViolation("illegal_space", f"the {c.box} box takes no space name")
    slot = SLOT_OF.get((c.box, c.space))
    if slot is None:
        raise RuleViolation("unknown_box", f"there is no box {c.box!r}")
    if not _slot_open(s, c.seat, slot):
        if c.box == "initiative" and c.seat in s.initiative:
            raise RuleViolation("illegal_space", "a player may not put two units in Initiative")
        raise RuleViolation("box_full", f"no free space in the {c.box} box for seat {c.seat}")


def _check_buy(s: GameState, c: Command) -> None:
    assert isinstance(c, BuyBuilding)
    b = s.rules.building_index.get(c.building)
    if b is None or b not in s.revealed_buildings:
        raise RuleViolation("building_unavailable", f"{c.building!r} is not on offer")
    if s.money[c.seat] < _price(s):
        raise RuleViolation("not_enough_money", f"{c.building} costs ${_price(s)}")
    if c.regions not in _buy_choices(s, c.seat, b):
        if not c.regions:
            raise RuleViolation("illegal_region", f"{c.building} needs regions chosen")
        raise RuleViolation("illegal_region", f"{c.building} cannot take regions {list(c.regions)}")


def _check_expedition(s: GameState, c: Command) -> None:
    assert isinstance(c, Expedition)
    have = s.disc[c.seat]
    sent = (c.colonists, c.captains, c.soldiers)
    if any(not isinstance(x, int) or x < 0 for x in sent) or not any(sent):
        raise RuleViolation("illegal", "send at least one unit, and no negative counts")
    if any(x > h for x, h in zip(sent, have, strict=True)):
        raise RuleViolation(
            "no_unit", f"seat {c.seat} has only {have} (colonists, captains, soldiers) in Discovery"
        )
    targets = _expedition_targets(s)
    if c.region not in targets:
        named = ", ".join(_target_name(t) for t in targets) or "nothing"
        raise RuleViolation(
            "illegal_region",
            f"no expedition can target {_target_name(c.region)} now; it can target {named}",
        )


def _target_name(region: str | None) -> str:
    """An expedition target for a message: a region, or (None) the discovery deck."""
    return "the discovery deck" if region is None else repr(region)


def _check_war(s: GameState, c: Command) -> None:
    if s.money[c.seat] < s.rules.ruleset.values.war_cost:
        raise RuleViolation("not_enough_money", f"a war costs ${s.rules.ruleset.values.war_cost}")
    _check_listed(s, c)


CHECKS: dict[type[Command], Callable[[GameState, Command], None]] = {
    Place: _check_place,
    BuyBuilding: _check_buy,
    Expedition: _check_expedition,
    War: _check_war,
}


# --- performing commands ---------------------------------------------------------------------

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


# --- automatic steps -------------------------------------------------------------------------


def _advance(s: GameState, out: list[Event]) -> None:
    """Play automatic steps and forced choices until a real decision is pending."""
    while s.phase != "over":
        if s.phase == "placement" and s.to_place:
            return  # a placement is never forced (and is most decisions)
        decisions = pending(s)
        if not decisions:
            AUTO[s.phase](s, out)
            continue
        if len(decisions) == 1:  # the usual case, without the lists below
            command = _forced(s, decisions[0])
            if command is None:
                return
            PERFORM[type(command)](s, command, decisions[0], out)
            continue
        forced = [_forced(s, d) for d in decisions]
        if all(f is None for f in forced):
            return
        for d, command in zip(decisions, forced, strict=True):
            if command is not None:
                PERFORM[type(command)](s, command, d, out)
                break


def _forced(s: GameState, d: Decision) -> Command | None:
    """The only legal command for ``d``, if there is exactly one."""
    if d.kind == "place":
        return None
    if d.kind == "expedition":
        return None if _expedition_targets(s) else _made(Pass, d.seat)
    chooses = CHOOSES.get(d.kind)
    if chooses is not None and chooses(s, d.seat):
        return None  # a choice for sure: its commands are listed once, by the player
    options = LEGAL[d.kind](s, d.seat)
    return options[0] if len(options) == 1 else None


# For some decisions, a cheap sufficient sign of two legal commands at least (Pass and one
# other), which spares ``_forced`` listing them all: the player lists them next anyway.


def _chooses_conflict(s: GameState, seat: int) -> bool:
    """Pass, and a Battle wherever the seat shares a region with another seat."""
    others = s.n - 2  # at most this many empty seats where two seats have units
    return any(here[seat] and here.count(0) <= others for here in s.units)


def _chooses_buy(s: GameState, seat: int) -> bool:
    """Pass, and every revealed building (each offers one choice at least) if affordable."""
    return bool(s.revealed_buildings) and s.money[seat] >= _price(s) and True in s.discovered


def _chooses_bid(s: GameState, seat: int) -> bool:
    """Pass, and a bid of every amount above the highest up to the seat's money."""
    return s.money[seat] > s.bid_high


CHOOSES: dict[str, Callable[[GameState, int], bool]] = {
    "conflict": _chooses_conflict,
    "buy": _chooses_buy,
    "bid": _chooses_bid,
}


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
