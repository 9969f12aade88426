"""Build games and put them into the situations of the rulebook examples and rule tests.

Everything here goes through the public API (``new_game``, ``pending``, ``legal_commands``,
``decide_into``) except the set-up itself, which writes the plain ``GameState`` fields
(units on the map, money, goods, owned buildings, the units still to place) the way a
situation of the rulebook describes them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from functools import lru_cache
from typing import Any

from hypothesis import strategies as st

from shared.games.age_of_discovery import (
    Command,
    Decision,
    Event,
    GameState,
    Pass,
    Place,
    Rules,
    compile_rules,
    decide_into,
    legal_commands,
    load_ruleset,
    new_game,
    pending,
)

UNIT_NAMES = ("colonist", "captain", "merchant", "missionary", "soldier")

Chooser = Callable[[GameState, Decision], Command | None]


# The edition options of rules §8 (default first), and a strategy drawing one of each.
EDITION_OPTIONS: dict[str, list[Any]] = {
    "navy_vp_per_ship": [4, 3],
    "factory_income": [25, 30],
    "tile_set": ["standard", "extended"],
    "university": ["to_front", "one_forward"],
    "starting_order": ["random", "auction"],
}
OPTIONS = st.fixed_dictionaries(
    {name: st.sampled_from(choices) for name, choices in EDITION_OPTIONS.items()}
)


@lru_cache(maxsize=16)
def _rules(options: tuple[tuple[str, Any], ...]) -> Rules:
    return compile_rules(load_ruleset("standard"), dict(options))


def rules(**options: Any) -> Rules:
    """The standard ruleset compiled with edition ``options`` (cached)."""
    return _rules(tuple(sorted(options.items())))


def game(players: int = 4, seed: int = 1, **options: Any) -> GameState:
    """A fresh game, dealt and waiting for its first decision."""
    state, _ = new_game(rules(**options), None, players, seed)
    return state


# --- lookups ---------------------------------------------------------------------------------


def region(state: GameState, name: str) -> int:
    return state.rules.region_index[name]


def good(state: GameState, name: str) -> int:
    return state.rules.good_index[name]


def card_index(state: GameState, name: str) -> int:
    return next(i for i, c in enumerate(state.rules.ruleset.cards) if c.name == name)


def token_with(state: GameState, natives: int) -> int:
    """The index of a discovery token showing ``natives`` natives."""
    return next(i for i, t in enumerate(state.rules.tokens) if t[2] == natives)


def events_of(events: Iterable[Event], type_: str) -> list[dict[str, Any]]:
    return [e.data for e in events if e.type == type_]


def money_events(events: Iterable[Event], reason: str) -> list[tuple[int, int]]:
    """(seat, amount) of every money event with that reason, in order."""
    return [(d["seat"], d["amount"]) for d in events_of(events, "money") if d["reason"] == reason]


# --- situations ------------------------------------------------------------------------------


def set_units(state: GameState, where: str, seat: int, units: int, soldiers: int = 0) -> None:
    """Put ``units`` units of ``seat`` (``soldiers`` of them soldiers) in a region."""
    assert soldiers <= units
    r = region(state, where)
    state.units[r][seat] = units
    state.soldiers[r][seat] = soldiers


def discover(state: GameState, *names: str) -> None:
    """Mark regions as discovered; their face-down tokens go to the unused tokens."""
    for name in names:
        r = region(state, name)
        if state.token_on[r] >= 0:
            state.unused_tokens.append(state.token_on[r])
            state.token_on[r] = -1
        state.discovered[r] = True
        state.token_known[r] = False


def discover_all(state: GameState) -> None:
    discover(state, *state.rules.regions)


def put_token(state: GameState, where: str, token: int) -> None:
    """Lay ``token`` face down on an undiscovered region, swapping it with where it was."""
    r = region(state, where)
    assert state.token_on[r] >= 0, f"{where} is already discovered"
    current = state.token_on[r]
    if current == token:
        return
    if token in state.unused_tokens:
        state.unused_tokens[state.unused_tokens.index(token)] = current
    else:
        other = state.token_on.index(token)
        state.token_on[other] = current
    state.token_on[r] = token


def card_on_top(state: GameState, name: str) -> int:
    """Move the named discovery card to the top of the deck; return its index."""
    card = card_index(state, name)
    state.deck.remove(card)
    state.deck.append(card)
    return card


def give_building(state: GameState, seat: int, building_id: str) -> int:
    """``seat`` owns the building (taken from the display or its pile, so it is not dealt
    twice)."""
    b = state.rules.building_index[building_id]
    if b in state.revealed_buildings:
        state.revealed_buildings.remove(b)
    else:
        for pile in state.piles:
            if b in pile:
                pile.remove(b)
                break
    state.owned[seat].append(b)
    return b


def offer_only(state: GameState, building_id: str) -> int:
    """Make ``building_id`` the only building on display (taken out of its pile)."""
    b = state.rules.building_index[building_id]
    for pile in state.piles:
        if b in pile:
            pile.remove(b)
    state.revealed_buildings = [b]
    return b


def start_placement(
    state: GameState,
    units: dict[int, dict[str, int]],
    order: list[int] | None = None,
    turn: int | None = None,
) -> None:
    """Restart the placement phase with exactly ``units`` to place ({seat: {unit: count}});
    seats not named have nothing to place. Boxes must still be empty (start of a turn)."""
    if order is not None:
        assert sorted(order) == list(range(state.n))
        state.order = list(order)
    if turn is not None:
        state.turn = turn
    state.phase = "placement"
    for seat in range(state.n):
        counts = units.get(seat, {})
        state.avail[seat] = [counts.get(name, 0) for name in UNIT_NAMES]
    state.queue = state.order[:]
    state.to_place = sum(sum(a) for a in state.avail)
    state.cursor = 0
    while state.to_place and not any(state.avail[state.queue[state.cursor]]):
        state.cursor += 1


# --- driving the game ------------------------------------------------------------------------


def default_choice(state: GameState, decision: Decision) -> Command:
    """A neutral choice: place the first available unit in Merchant Shipping (unlimited),
    pass when passing is allowed, otherwise the first legal command."""
    seat = decision.seat
    if decision.kind == "place":
        unit = next(UNIT_NAMES[u] for u, c in enumerate(state.avail[seat]) if c)
        return Place(seat, unit, "shipping")
    legal = legal_commands(state, seat)
    if Pass(seat) in legal:
        return Pass(seat)
    return legal[0]


def run(
    state: GameState,
    choose: Chooser | None = None,
    until: str | Callable[[GameState], bool] | None = None,
    max_steps: int = 2000,
) -> list[Event]:
    """Answer decisions (``choose`` first, else :func:`default_choice`) with ``decide_into``
    until an event of type ``until`` has happened (or ``until(state)`` holds, or the game
    is over). Returns every event produced."""
    out: list[Event] = []
    for _ in range(max_steps):
        if isinstance(until, str) and any(e.type == until for e in out):
            return out
        if callable(until) and until(state):
            return out
        decisions = pending(state)
        if not decisions:
            return out
        d = decisions[0]
        command = (choose(state, d) if choose else None) or default_choice(state, d)
        out += decide_into(state, command)
    raise AssertionError(f"no end after {max_steps} decisions")


def place_in_order(state: GameState, placements: Iterable[tuple[Any, ...]]) -> list[Event]:
    """Make placements ``(seat, unit, box[, space])`` one by one, checking that each is that
    seat's turn. Returns the events (the last placement plays on up to the next decision)."""
    out: list[Event] = []
    for seat, unit, box, *space in placements:
        (d,) = pending(state)
        assert d == Decision(seat, "place"), f"expected seat {seat} to place, pending {d}"
        out += decide_into(state, Place(seat, unit, box, space[0] if space else None))
    return out
