"""Navegador's rules: who decides what, which commands are legal, what a command causes.

``decide`` turns a command into events, then plays every automatic step (an action with
nothing left to choose ends, a ship owed from the only region holding ships is paid, the
card passes, a phase starts, the next turn starts, the game ends) until a real decision is
pending or the game is over. Events are applied to a private copy as they are made.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from functools import lru_cache
from typing import Any, TypeVar

from ..commands import Command
from ..protocol import Decision, Event, RuleViolation
from ..ruleset_files import CARRIED
from .commands import (
    Build,
    BuyShips,
    Explore,
    Found,
    Pass,
    PayShip,
    Process,
    Recruit,
    Rondel,
    Sail,
    Sell,
    TakePrivilege,
    UseCard,
)
from .evolve import HANDLERS
from .ruleset import COLUMNS, Rules
from .scoring import final_results
from .state import State, blank_state

NAME = "navegador"

C = TypeVar("C", bound=Command)

ANSWERS: dict[str, tuple[type[Command], ...]] = {
    "turn": (Rondel, UseCard),
    "pay": (PayShip,),
    "sailing": (Sail, Explore, Pass),
    "workers": (Recruit, Pass),
    "ships": (BuyShips, Pass),
    "market": (Sell, Process, Pass),
    "colony": (Found, Pass),
    "privilege": (TakePrivilege, Pass),
    "buildings": (Build, Pass),
}


def _emit(
    s: State,
    out: list[Event],
    type_: str,
    data: dict[str, Any],
    secret: dict[str, Any] | None = None,
) -> None:
    """Apply an event to the private state and record it (the handler called directly:
    this runs a few times per decision)."""
    HANDLERS[type_](s, data, secret)
    out.append(Event(type_, data, secret))


# --- new game --------------------------------------------------------------------------------


def new_game(rules: Rules, players: Sequence[str] | int, seed: int) -> tuple[State, list[Event]]:
    """Deal a new game: the initial state and the setup events that produce it."""
    names = [f"seat {i}" for i in range(players)] if isinstance(players, int) else list(players)
    r = rules.ruleset
    if not r.min_players <= len(names) <= r.max_players:
        raise RuleViolation(
            "bad_player_count", f"{r.title} takes {r.min_players} to {r.max_players} players"
        )
    s = blank_state(rules, len(names))
    out: list[Event] = []
    created: dict[str, Any] = {"game": NAME, "ruleset": r.name, "options": {}, "players": names}
    if rules.file is not None:
        created[CARRIED] = rules.file
    _emit(s, out, "game_created", created, secret={"seed": seed})
    chance = random.Random(seed)
    stacks: list[list[int]] = [[] for _ in rules.regions]
    removed: list[list[int]] = []
    for g, tokens in enumerate(rules.tokens):
        pile = list(tokens)
        chance.shuffle(pile)
        removed.append(sorted(pile[: rules.removed[g]]))
        del pile[: rules.removed[g]]
        for region, good in enumerate(rules.region_good):
            if good == g:
                stacks[region] = sorted(pile[: rules.stack_size[region]])
                del pile[: rules.stack_size[region]]
    start = chance.randrange(s.n)
    _emit(
        s,
        out,
        "setup",
        {"start_player": start, "card_holder": (start - 1) % s.n},
        secret={"stacks": stacks, "removed": removed},
    )
    _emit(s, out, "turn_started", {"seat": start, "turn": 1})
    _advance(s, out)
    return s, out


# --- pending and legal commands --------------------------------------------------------------


def pending(s: State) -> tuple[Decision, ...]:
    if s.stage == "over":
        return ()
    return _decisions(s.current, s.stage)


@lru_cache(maxsize=1024)
def _decisions(seat: int, stage: str) -> tuple[Decision, ...]:
    """Decisions are immutable: each (seat, stage) is made once, not at every decision."""
    return (Decision(seat, stage),)


def legal_commands(s: State, seat: int) -> list[Command]:
    if s.stage == "over" or seat != s.current:
        return []
    legal = LEGAL.get(s.stage)
    return [] if legal is None else legal(s, seat)


def _legal_turn(s: State, seat: int) -> list[Command]:
    out: list[Command] = []
    if _card_usable(s, seat):
        out.append(_made(UseCard, seat))
    out += [_made(Rondel, seat, f) for f, _, _ in _rondel_moves(s, seat)]
    return out


@lru_cache(maxsize=8192)
def _made(kind: type[C], *args: Any) -> C:
    """Commands are immutable: each legal one is made once and reused (random play and the
    bots' playouts list them at every decision, and a frozen dataclass is slow to build)."""
    return kind(*args)


def _card_usable(s: State, seat: int) -> bool:
    """The holder may sail first, once their stone is on the rondel (never in the first
    round)."""
    return s.stage == "turn" and seat == s.holder and s.stone[seat] >= 0


def _rondel_moves(s: State, seat: int) -> tuple[tuple[int, int, int], ...]:
    """(field, steps, ships it costs) for each field the stone may move to, in field order."""
    return s.rules.rondel_moves(s.stone[seat], s.on_board(seat))


def _legal_pay(s: State, seat: int) -> list[Command]:
    regions = s.rules.regions
    return [_made(PayShip, seat, regions[r]) for r, count in enumerate(s.ships[seat]) if count]


def _sail_range(s: State) -> int:
    return s.rules.ranges[s.phase - 1]


def _party(s: State, region: int) -> int:
    """Ships that must arrive together to explore ``region``: one more than it loses."""
    return _loss(s, region) + 1


def _loss(s: State, region: int) -> int:
    return 2 if s.n <= s.rules.double_loss_up_to[region] else 1


def _legal_sailing(s: State, seat: int) -> list[Command]:
    rules = s.rules
    names = rules.regions
    reach = _sail_range(s)
    ships, moved, explored = s.ships[seat], s.moved, s.explored
    out: list[Command] = []
    free = [(r, ships[r] - moved[r]) for r in range(len(names)) if ships[r] > moved[r]]
    for r, _ in free:
        out += [
            _made(Sail, seat, names[r], names[d]) for d in rules.sail_targets(explored, r, reach)
        ]
    if not s.explored_now:
        for x in range(len(names)):
            if explored >> x & 1:
                continue
            able = [(r, n) for r, n in free if rules.distances(explored, r)[x] <= reach]
            out += [
                _made(Explore, seat, names[x], tuple(names[r] for r in party))
                for party in _parties(able, _party(s, x))
            ]
    out.append(_made(Pass, seat))
    return out


def _parties(able: list[tuple[int, int]], size: int) -> list[tuple[int, ...]]:
    """Every multiset of ``size`` origins (in region order), each used at most its count."""
    if size == 0:
        return [()]
    out = []
    for i, (r, count) in enumerate(able):
        rest = [(r, count - 1), *able[i + 1 :]] if count > 1 else able[i + 1 :]
        out += [(r, *tail) for tail in _parties(rest, size - 1)]
    return out


def _hire(
    s: State, facilities: int, room: int, count: int, money: int
) -> tuple[int, int, int] | None:
    """Recruiting workers or building ships: (cost, gained, sold) for ``count``, or None
    if not allowed. The first ``facilities`` cost the facility price; further ones the
    phase's price and only while there is ``room``; facility ones past the room are paid
    first, then sold at once."""
    prices = s.rules.ruleset.prices
    cheap = min(count, facilities)
    dear = count - cheap
    if count < 1 or (dear and cheap + dear > room):
        return None
    cost = cheap * prices.facility + dear * prices.per_phase * s.phase
    if cost > money:
        return None
    gained = min(count, room)
    return cost, gained, count - gained


def _hire_counts(s: State, facilities: int, room: int, money: int) -> list[int]:
    """The counts :func:`_hire` allows: 1 up to the first refused one (a larger count costs
    more and needs more room, so none after it is allowed)."""
    counts = []
    for c in range(1, max(facilities, room) + 1):
        if _hire(s, facilities, room, c, money) is None:
            break
        counts.append(c)
    return counts


def _legal_workers(s: State, seat: int) -> list[Command]:
    room = s.rules.ruleset.player.max_workers - s.workers[seat]
    counts = _hire_counts(s, s.churches[seat], room, s.money[seat])
    return [*(_made(Recruit, seat, c) for c in counts), _made(Pass, seat)]


def _legal_ships(s: State, seat: int) -> list[Command]:
    counts = _hire_counts(s, s.shipyards[seat], s.in_supply(seat), s.money[seat])
    return [*(_made(BuyShips, seat, c) for c in counts), _made(Pass, seat)]


def _trade_limits(s: State, seat: int, g: int) -> tuple[int, int]:
    """Units of good ``g`` the seat may sell and process now (0, 0 once traded)."""
    if s.traded[g]:
        return 0, 0
    wild = 0 if s.wild_used else s.rules.ruleset.player.wildcard_factories
    return len(s.colonies[seat][g]), s.factories[seat][g] + wild


def _legal_market(s: State, seat: int) -> list[Command]:
    out: list[Command] = []
    for g, good in enumerate(s.rules.goods):
        sell, process = _trade_limits(s, seat, g)
        out += [_made(Sell, seat, good, c) for c in range(1, sell + 1)]
        out += [_made(Process, seat, good, c) for c in range(1, process + 1)]
    out.append(_made(Pass, seat))
    return out


def _colony_regions(s: State, seat: int) -> list[int]:
    """Regions where the seat may found a colony now."""
    if s.workers[seat] - s.used_workers < 2:
        return []
    money, ships, used = s.money[seat], s.ships[seat], s.used_ships
    return [
        r
        for r, stack in enumerate(s.stacks)
        if stack and s.explored >> r & 1 and ships[r] > used[r] and stack[0] <= money
    ]


def _legal_colony(s: State, seat: int) -> list[Command]:
    names = s.rules.regions
    return [*(_made(Found, seat, names[r]) for r in _colony_regions(s, seat)), _made(Pass, seat)]


def _buildable(s: State, seat: int) -> list[int]:
    spare = s.workers[seat] - s.used_workers
    money = s.money[seat]
    return [
        t
        for t, track in enumerate(s.rules.tracks)
        if s.left[t] and track.workers <= spare and s.price(t) <= money
    ]


def _legal_buildings(s: State, seat: int) -> list[Command]:
    tracks = s.rules.tracks
    return [*(_made(Build, seat, tracks[t].id) for t in _buildable(s, seat)), _made(Pass, seat)]


def _privilege_columns(s: State, seat: int) -> list[int]:
    if s.workers[seat] <= s.rules.ruleset.player.min_workers:
        return []
    held = s.privileges[seat]
    positions = s.rules.coins
    return [c for c in range(len(COLUMNS)) if s.gallery[c] and held[c] < len(positions[c])]


def _legal_privilege(s: State, seat: int) -> list[Command]:
    return [
        *(_made(TakePrivilege, seat, COLUMNS[c]) for c in _privilege_columns(s, seat)),
        _made(Pass, seat),
    ]


LEGAL: dict[str, Callable[[State, int], list[Command]]] = {
    "turn": _legal_turn,
    "pay": _legal_pay,
    "sailing": _legal_sailing,
    "workers": _legal_workers,
    "ships": _legal_ships,
    "market": _legal_market,
    "colony": _legal_colony,
    "privilege": _legal_privilege,
    "buildings": _legal_buildings,
}


# --- decide ----------------------------------------------------------------------------------


def decide(state: State, command: Command) -> list[Event]:
    """The events ``command`` causes, up to the next real decision; ``state`` unchanged.
    Raises :class:`RuleViolation` (a code and a reason) for a command the rules refuse."""
    _check(state, command)
    return _perform(state.copy(), command)


def decide_into(s: State, command: Command, *, trusted: bool = False) -> list[Event]:
    """:func:`decide` on a private state, left advanced past the events (the fast path);
    a refused command leaves it unchanged. ``trusted``
    (:meth:`~shared.games.api.Game.decide_into`): ``command`` was taken from
    ``legal_commands(s, command.seat)`` in this very state, so it is not checked again."""
    if not trusted:
        _check(s, command)
    return _perform(s, command)


def _perform(s: State, command: Command) -> list[Event]:
    out: list[Event] = []
    PERFORM[type(command)](s, command, out)
    _advance(s, out)
    return out


def _check(s: State, command: Command) -> None:
    if not isinstance(command, Command):
        raise RuleViolation("malformed", "not a command")
    if s.stage == "over":
        raise RuleViolation("game_over", "the game is over")
    seat = command.seat
    if type(seat) is not int or not 0 <= seat < s.n:
        raise RuleViolation("unknown_seat", f"there is no seat {seat!r}: seats 0 to {s.n - 1}")
    if seat != s.current:
        raise RuleViolation(
            "out_of_turn", f"seat {seat} has nothing to decide; waiting for seat {s.current}"
        )
    if type(command) not in ANSWERS[s.stage]:
        expected = ", ".join(c.type for c in ANSWERS[s.stage])
        raise RuleViolation(
            "wrong_command", f"seat {seat} must decide '{s.stage}': send one of {expected}"
        )
    CHECKS[type(command)](s, command)


def _region_named(s: State, name: str) -> int:
    r = s.rules.region_index(name)
    if r < 0:
        raise RuleViolation("unknown_region", f"there is no region {name!r}")
    return r


def _check_use_card(s: State, c: Command) -> None:
    if c.seat != s.holder:
        raise RuleViolation("not_card_holder", f"seat {s.holder} holds the Navegador card")
    if s.stone[c.seat] < 0:
        raise RuleViolation("card_not_usable_yet", "the card is not used in the first round")


def _check_rondel(s: State, c: Command) -> None:
    assert isinstance(c, Rondel)
    fields = len(s.rules.fields)
    if type(c.field) is not int or not 0 <= c.field < fields:
        raise RuleViolation("unknown_field", f"the rondel has fields 0 to {fields - 1}")
    here = s.stone[c.seat]
    steps = (c.field - here) % fields or fields
    cost = steps - s.rules.ruleset.rondel.free_steps
    if here >= 0 and cost > s.on_board(c.seat):
        raise RuleViolation(
            "not_enough_ships",
            f"{steps} steps cost {cost} ships; seat {c.seat} has {s.on_board(c.seat)} on the board",
        )


def _check_pay_ship(s: State, c: Command) -> None:
    assert isinstance(c, PayShip)
    r = _region_named(s, c.region)
    if not s.ships[c.seat][r]:
        raise RuleViolation("no_ship", f"seat {c.seat} has no ship in {c.region}")


def _check_sail(s: State, c: Command) -> None:
    assert isinstance(c, Sail)
    origin, destination = _region_named(s, c.origin), _region_named(s, c.destination)
    if s.ships[c.seat][origin] <= s.moved[origin]:
        raise RuleViolation(
            "no_ship", f"seat {c.seat} has no ship in {c.origin} that has not sailed yet"
        )
    if origin == destination:
        raise RuleViolation("same_region", "a ship sails to another region")
    if not s.is_explored(destination):
        raise RuleViolation(
            "unexplored", f"{c.destination} is unexplored: ships enter it only by exploring"
        )
    if s.rules.distances(s.explored, origin)[destination] > _sail_range(s):
        raise RuleViolation(
            "too_far",
            f"{c.destination} is beyond {_sail_range(s)} borders of {c.origin} through "
            "explored regions",
        )


def _check_explore(s: State, c: Command) -> None:
    assert isinstance(c, Explore)
    x = _region_named(s, c.region)
    if s.is_explored(x):
        raise RuleViolation("explored", f"{c.region} is explored already")
    if s.explored_now:
        raise RuleViolation("one_exploration", "one exploration per Sailing action")
    party = _party(s, x)
    if len(c.origins) != party:
        raise RuleViolation("party_size", f"{c.region} is explored by {party} ships together")
    origins = [_region_named(s, o) for o in c.origins]
    if origins != sorted(origins):
        raise RuleViolation("origins_order", "list the origins in the map's region order")
    ships, moved = s.ships[c.seat], s.moved
    for o in set(origins):
        if ships[o] - moved[o] < origins.count(o):
            raise RuleViolation(
                "no_ship", f"seat {c.seat} has too few unsailed ships in {s.rules.regions[o]}"
            )
        if s.rules.distances(s.explored, o)[x] > _sail_range(s):
            raise RuleViolation(
                "too_far", f"{c.region} is beyond {_sail_range(s)} borders of {s.rules.regions[o]}"
            )


def _check_found(s: State, c: Command) -> None:
    assert isinstance(c, Found)
    r = _region_named(s, c.region)
    seat = c.seat
    if not s.is_explored(r) or not s.stacks[r]:
        raise RuleViolation("no_colony", f"{c.region} has no colony to found")
    if s.ships[seat][r] <= s.used_ships[r]:
        raise RuleViolation("no_ship", f"no ship of seat {seat} free for a colony in {c.region}")
    if s.workers[seat] - s.used_workers < 2:
        raise RuleViolation("not_enough_workers", "each colony needs two workers of its own")
    if s.stacks[r][0] > s.money[seat]:
        raise RuleViolation("not_enough_money", f"the colony costs {s.stacks[r][0]}")


def _check_build(s: State, c: Command) -> None:
    assert isinstance(c, Build)
    tracks = s.rules.tracks
    t = next((i for i, track in enumerate(tracks) if track.id == c.building), -1)
    if t < 0:
        known = ", ".join(track.id for track in tracks)
        raise RuleViolation("unknown_building", f"no building {c.building!r}; known: {known}")
    if not s.left[t]:
        raise RuleViolation("sold_out", f"no {c.building} is left")
    if tracks[t].workers > s.workers[c.seat] - s.used_workers:
        raise RuleViolation(
            "not_enough_workers",
            f"the buildings of this action need {s.used_workers + tracks[t].workers} workers",
        )
    if s.price(t) > s.money[c.seat]:
        raise RuleViolation("not_enough_money", f"the {c.building} costs {s.price(t)}")


def _good_named(s: State, name: str) -> int:
    if name not in s.rules.goods:
        raise RuleViolation("unknown_good", f"no good {name!r}")
    g = s.rules.goods.index(name)
    if s.traded[g]:
        raise RuleViolation("already_traded", f"{name} was sold or processed in this action")
    return g


def _check_sell(s: State, c: Command) -> None:
    assert isinstance(c, Sell)
    g = _good_named(s, c.good)
    top = _trade_limits(s, c.seat, g)[0]
    if type(c.count) is not int or not 1 <= c.count <= top:
        raise RuleViolation("bad_count", f"sell 1 to {top} {c.good}: one per colony")


def _check_process(s: State, c: Command) -> None:
    assert isinstance(c, Process)
    g = _good_named(s, c.good)
    top = _trade_limits(s, c.seat, g)[1]
    if type(c.count) is not int or not 1 <= c.count <= top:
        raise RuleViolation(
            "bad_count", f"process 1 to {top} {c.good}: one per factory (the orange one once)"
        )


def _check_hire(s: State, count: Any, facilities: int, room: int, what: str) -> None:
    if type(count) is not int or _hire(s, facilities, room, count, s.money[s.current]) is None:
        counts = _hire_counts(s, facilities, room, s.money[s.current])
        allowed = f"1 to {counts[-1]}" if counts else "none"
        code = (
            "not_enough_money"
            if type(count) is int and 1 <= count <= max(facilities, room)
            else "bad_count"
        )
        raise RuleViolation(code, f"{what}: {allowed} now")


def _check_recruit(s: State, c: Command) -> None:
    assert isinstance(c, Recruit)
    room = s.rules.ruleset.player.max_workers - s.workers[c.seat]
    _check_hire(s, c.count, s.churches[c.seat], room, "workers")


def _check_buy_ships(s: State, c: Command) -> None:
    assert isinstance(c, BuyShips)
    _check_hire(s, c.count, s.shipyards[c.seat], s.in_supply(c.seat), "ships")


def _check_privilege(s: State, c: Command) -> None:
    assert isinstance(c, TakePrivilege)
    if c.column not in COLUMNS:
        raise RuleViolation("unknown_column", f"no privilege {c.column!r}; known: {COLUMNS}")
    col = COLUMNS.index(c.column)
    if s.workers[c.seat] <= s.rules.ruleset.player.min_workers:
        raise RuleViolation("not_enough_workers", "a privilege costs a worker, never the last two")
    if not s.gallery[col]:
        raise RuleViolation("gallery_empty", f"no {c.column} privilege in the gallery")
    if s.privileges[c.seat][col] >= len(s.rules.coins[col]):
        raise RuleViolation("column_full", f"seat {c.seat} holds every {c.column} privilege")


def _check_nothing(s: State, c: Command) -> None:
    """Pass needs no check beyond being an answer to the decision."""


CHECKS: dict[type[Command], Callable[[State, Any], None]] = {
    UseCard: _check_use_card,
    Rondel: _check_rondel,
    PayShip: _check_pay_ship,
    Sail: _check_sail,
    Explore: _check_explore,
    Found: _check_found,
    Build: _check_build,
    Sell: _check_sell,
    Process: _check_process,
    Recruit: _check_recruit,
    BuyShips: _check_buy_ships,
    TakePrivilege: _check_privilege,
    Pass: _check_nothing,
}


# --- performing ------------------------------------------------------------------------------


def _do_use_card(s: State, c: Any, out: list[Event]) -> None:
    _emit(s, out, "card_used", {"seat": c.seat})


def _do_rondel(s: State, c: Any, out: list[Event]) -> None:
    seat = c.seat
    here = s.stone[seat]
    fields = len(s.rules.fields)
    steps = 0 if here < 0 else (c.field - here) % fields or fields
    cost = max(0, steps - s.rules.ruleset.rondel.free_steps)
    lapses = False
    if seat == s.holder and s.marker >= 0 and here >= 0:
        lapses = steps >= ((s.marker - here) % fields or fields)
    data = {"seat": seat, "field": c.field, "action": s.rules.fields[c.field], "steps": steps}
    _emit(s, out, "rondel_moved", {**data, "cost": cost})
    if lapses:
        _pass_card(s, out, "lapsed")


def _pass_card(s: State, out: list[Event], reason: str) -> None:
    to = (s.holder - 1) % s.n
    _emit(
        s,
        out,
        "card_passed",
        {"from": s.holder, "to": to, "marker": s.stone[to], "reason": reason},
    )


def _do_pay_ship(s: State, c: Any, out: list[Event]) -> None:
    _emit(s, out, "ship_paid", {"seat": c.seat, "region": c.region})


def _do_sail(s: State, c: Any, out: list[Event]) -> None:
    _emit(s, out, "ship_sailed", {"seat": c.seat, "origin": c.origin, "destination": c.destination})


def _do_explore(s: State, c: Any, out: list[Event]) -> None:
    rules = s.rules
    x = rules.regions.index(c.region)
    tokens = list(s.stacks[x])
    _emit(
        s,
        out,
        "explored",
        {
            "seat": c.seat,
            "region": c.region,
            "origins": list(c.origins),
            "lost": _loss(s, x),
            "tokens": tokens,
            "bonus": min(tokens, default=0),
            "starts_phase": rules.starts_phase[x],
        },
    )
    if rules.ends_game[x] and not s.triggered:
        _emit(s, out, "end_triggered", {"seat": c.seat, "reason": "explored", "region": c.region})


def _do_found(s: State, c: Any, out: list[Event]) -> None:
    r = s.rules.regions.index(c.region)
    good = s.rules.goods[s.rules.region_good[r]]
    price = s.stacks[r][0]
    _emit(
        s, out, "colony_founded", {"seat": c.seat, "region": c.region, "good": good, "price": price}
    )


def _do_build(s: State, c: Any, out: list[Event]) -> None:
    t = next(i for i, track in enumerate(s.rules.tracks) if track.id == c.building)
    _emit(s, out, "building_bought", {"seat": c.seat, "building": c.building, "price": s.price(t)})
    if not any(s.left) and not s.triggered:
        _emit(s, out, "end_triggered", {"seat": c.seat, "reason": "buildings", "region": None})


def _do_sell(s: State, c: Any, out: list[Event]) -> None:
    g = s.rules.goods.index(c.good)
    row = s.market[g]
    price = s.rules.prices[row][g]
    data = {"seat": c.seat, "good": c.good, "count": c.count, "price": price}
    new_row = min(len(s.rules.prices) - 1, row + c.count)
    _emit(s, out, "goods_sold", {**data, "income": price * c.count, "row": new_row})


def _do_process(s: State, c: Any, out: list[Event]) -> None:
    g = s.rules.goods.index(c.good)
    row = s.market[g]
    each = s.rules.factory_income[row]
    wildcard = c.count > s.factories[c.seat][g]
    data = {"seat": c.seat, "good": c.good, "count": c.count, "each": each, "wildcard": wildcard}
    _emit(
        s, out, "goods_processed", {**data, "income": each * c.count, "row": max(0, row - c.count)}
    )


def _hired(s: State, seat: int, facilities: int, room: int, count: int) -> dict[str, Any]:
    found = _hire(s, facilities, room, count, s.money[seat])
    assert found is not None
    cost, gained, sold = found
    income = sold * s.rules.ruleset.prices.virtual_sale
    return {
        "seat": seat,
        "count": count,
        "cost": cost,
        "gained": gained,
        "sold": sold,
        "income": income,
    }


def _do_recruit(s: State, c: Any, out: list[Event]) -> None:
    room = s.rules.ruleset.player.max_workers - s.workers[c.seat]
    _emit(s, out, "workers_recruited", _hired(s, c.seat, s.churches[c.seat], room, c.count))


def _do_buy_ships(s: State, c: Any, out: list[Event]) -> None:
    data = _hired(s, c.seat, s.shipyards[c.seat], s.in_supply(c.seat), c.count)
    _emit(s, out, "ships_bought", data)


def _do_privilege(s: State, c: Any, out: list[Event]) -> None:
    col = COLUMNS.index(c.column)
    position = s.privileges[c.seat][col]
    coin = s.rules.coins[col][position]
    count = s.achievements(c.seat)[col]
    data = {"seat": c.seat, "column": c.column, "position": position, "coin": coin}
    _emit(s, out, "privilege_taken", {**data, "achievements": count, "income": coin * count})


def _do_pass(s: State, c: Any, out: list[Event]) -> None:
    _emit(s, out, "action_ended", {"seat": c.seat, "action": s.stage})


PERFORM: dict[type[Command], Callable[[State, Any, list[Event]], None]] = {
    UseCard: _do_use_card,
    Rondel: _do_rondel,
    PayShip: _do_pay_ship,
    Sail: _do_sail,
    Explore: _do_explore,
    Found: _do_found,
    Build: _do_build,
    Sell: _do_sell,
    Process: _do_process,
    Recruit: _do_recruit,
    BuyShips: _do_buy_ships,
    TakePrivilege: _do_privilege,
    Pass: _do_pass,
}


# --- the automatic steps ---------------------------------------------------------------------


def _advance(s: State, out: list[Event]) -> None:
    """Play every step that needs no choice, up to the next real decision or the end."""
    while True:
        stage = s.stage
        if stage == "card_done":
            _start_phase(s, out)  # a phase the card started counts from the regular turn
            _pass_card(s, out, "used")  # and the holder's own turn goes on
        elif stage == "turn_done":
            _end_turn(s, out)
        elif stage == "between":
            _start_phase(s, out)
            seat = (s.current + 1) % s.n
            _emit(s, out, "turn_started", {"seat": seat, "turn": s.turn + 1})
        elif stage == "pay" and sum(1 for count in s.ships[s.current] if count) == 1:
            region = next(r for r, count in enumerate(s.ships[s.current]) if count)
            _emit(s, out, "ship_paid", {"seat": s.current, "region": s.rules.regions[region]})
        elif stage in ANSWERS and stage not in ("turn", "pay") and _only_pass(s):
            _emit(s, out, "action_ended", {"seat": s.current, "action": stage})
        else:
            return


def _only_pass(s: State) -> bool:
    """The action under way offers nothing but to end it."""
    seat = s.current
    stage = s.stage
    if stage == "market":
        return not any(any(_trade_limits(s, seat, g)) for g in range(len(s.rules.goods)))
    if stage == "colony":
        return not _colony_regions(s, seat)
    if stage == "buildings":
        return not _buildable(s, seat)
    if stage == "privilege":
        return not _privilege_columns(s, seat)
    if stage == "workers":
        room = s.rules.ruleset.player.max_workers - s.workers[seat]
        return _hire(s, s.churches[seat], room, 1, s.money[seat]) is None
    if stage == "ships":
        return _hire(s, s.shipyards[seat], s.in_supply(seat), 1, s.money[seat]) is None
    if stage == "sailing":
        return not _can_sail(s, seat)
    return len(LEGAL[stage](s, seat)) == 1


def _can_sail(s: State, seat: int) -> bool:
    """Some ship can sail, or some party can explore (what :func:`_legal_sailing` would
    list besides ``pass``, without listing it)."""
    rules = s.rules
    reach = _sail_range(s)
    ships, moved, explored = s.ships[seat], s.moved, s.explored
    free = [(r, ships[r] - moved[r]) for r in range(len(ships)) if ships[r] > moved[r]]
    for r, _ in free:
        if rules.sail_targets(explored, r, reach):
            return True
    if s.explored_now:
        return False
    for x in range(len(ships)):
        if not explored >> x & 1:
            near = sum(n for r, n in free if rules.distances(explored, r)[x] <= reach)
            if near >= _party(s, x):
                return True
    return False


def _start_phase(s: State, out: list[Event]) -> None:
    if not s.next_phase:
        return
    phase = s.next_phase
    counts = s.rules.ruleset.gallery.reset[str(s.n)][phase - 2]
    gallery = [min(counts, g + sup) for g, sup in zip(s.gallery, s.supply, strict=True)]
    _emit(s, out, "phase_started", {"phase": phase, "gallery": gallery})


def _end_turn(s: State, out: list[Event]) -> None:
    if s.final_left > 0:
        left = s.final_left - 1
    elif s.triggered and s.final_left < 0:
        left = s.n  # every player, the triggering one included, has one final turn
    else:
        left = s.final_left
    _emit(s, out, "turn_ended", {"seat": s.current, "final_turns_left": left})
    if left == 0:
        _emit(s, out, "game_ended", {"results": final_results(s)})
