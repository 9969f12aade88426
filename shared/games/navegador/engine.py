"""Navegador's rules: a new game, and what a command causes (who decides what and which
commands are legal: :mod:`.legal`).

``decide`` turns a command into events, then plays every automatic step (an action with
nothing left to choose ends, a ship owed from the only region holding ships is paid, the
card passes, a phase starts, the next turn starts, the game ends) until a real decision is
pending or the game is over. Events are applied to a private copy as they are made.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import Any

from ..checks import command_seat, seat_names
from ..commands import Command
from ..protocol import Event, RuleViolation
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
from .evolve import handles
from .legal import (
    LEGAL,
    _buildable,
    _colony_regions,
    _hire,
    _hire_counts,
    _loss,
    _party,
    _privilege_columns,
    _sail_range,
    _trade_limits,
    legal_commands,
    pending,
)
from .ruleset import COLUMNS, Rules
from .scoring import final_results
from .state import State, blank_state

__all__ = ["NAME", "decide", "decide_into", "legal_commands", "new_game", "pending"]

NAME = "navegador"

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


_emit = handles.emit


# --- new game --------------------------------------------------------------------------------


def new_game(rules: Rules, players: Sequence[str] | int, seed: int) -> tuple[State, list[Event]]:
    """Deal a new game: the initial state and the setup events that produce it."""
    r = rules.ruleset
    names = seat_names(players, r)
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
    seat = command_seat(command, s.stage == "over", s.n)
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
