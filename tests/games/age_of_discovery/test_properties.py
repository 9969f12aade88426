"""Property-based tests of the Age of Discovery rules core (pytest + hypothesis).

Every test draws a game: 2-5 players, a full edition option dict and a seed. The seed both
deals the game and drives a seeded ``random.Random`` that picks uniformly among the seat's
legal commands, so every test body is deterministic given its drawn arguments: a failing
example printed by hypothesis replays exactly (``Spec(...).play()`` replays the plain game).

What holds for every game behind the Game protocol (replay equals live play, legal commands
are accepted, refused commands change nothing, views survive ``determinize``, snapshots
round-trip, games end with results) is checked for every registered game by tests/games;
this module keeps what is particular to The Age of Discovery: money, units, the end after
turn 8 and its scores, the package's own ``replay``, the keys that hold hidden values, the
events that may reveal chance, and ``determinize`` depending on public information only.
"""

from __future__ import annotations

import dataclasses
import json
import random
from collections.abc import Iterator
from functools import cache
from typing import Any

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from shared.games.age_of_discovery import (
    Command,
    Event,
    GameState,
    Rules,
    compile_rules,
    decide_into,
    determinize,
    legal_commands,
    load_ruleset,
    new_game,
    pending,
    replay,
    score,
    view,
)

from .scenarios import OPTIONS

RULESET = load_ruleset("standard")

# Keys under which the engine keeps hidden values (rules §10); none may reach a player.
SECRET_KEYS = frozenset({"token_on", "unused_tokens", "goods_pile", "piles", "deck", "rng", "seed"})

# Events that reveal a chance outcome (a token, a card, a pile's top, a reshuffle).
REVEALING_EVENTS = frozenset(
    {
        "setup",
        "expedition",
        "free_discovery",
        "caribbean_token",
        "deck_shuffled",
        "buildings_revealed",
        "goods_revealed",
    }
)

PROPERTY_SETTINGS = {
    "deadline": None,
    "suppress_health_check": [HealthCheck.too_slow, HealthCheck.data_too_large],
    # No "explain" phase: it replays many whole games after a failure, for little insight.
    "phases": [Phase.explicit, Phase.reuse, Phase.generate, Phase.target, Phase.shrink],
}


@cache
def _rules(options: tuple[tuple[str, Any], ...]) -> Rules:
    return compile_rules(RULESET, dict(options))


@dataclasses.dataclass(frozen=True)
class Spec:
    """One drawn game: replay a failure with ``Spec(players, options, seed).play()``."""

    players: int
    options: tuple[tuple[str, Any], ...]
    seed: int

    @property
    def rules(self) -> Rules:
        return _rules(self.options)

    def start(self) -> tuple[GameState, list[Event], random.Random]:
        state, events = new_game(self.rules, None, self.players, self.seed)
        return state, events, random.Random(self.seed)

    def play(self) -> tuple[GameState, list[Event]]:
        """The whole random game (for reproducing a failure by hand)."""
        state, log, rnd = self.start()
        for _, command in random_choices(state, rnd):
            log += decide_into(state, command)
        return state, log


specs = st.builds(
    Spec,
    players=st.integers(2, 5),
    options=OPTIONS.map(lambda d: tuple(sorted(d.items()))),
    seed=st.integers(0, 2**32 - 1),
)


def random_choices(state: GameState, rnd: random.Random) -> Iterator[tuple[list[Command], Command]]:
    """Yield (legal commands, the one chosen) before each decision until the game is over.

    The caller applies the chosen command to ``state`` before asking for the next one.
    """
    while decisions := pending(state):
        seat = rnd.choice(decisions).seat
        legal = legal_commands(state, seat)
        assert legal, f"seat {seat} must decide {decisions} but has no legal command"
        yield legal, rnd.choice(legal)


# --- helpers ---------------------------------------------------------------------------------


def units_in_play(s: GameState, seat: int) -> int:
    """Count a seat's units in every place a unit can be, independently of the engine."""
    count = sum(s.avail[seat])
    count += s.initiative.count(seat)
    count += sum(1 for owner, _ in s.dock if owner == seat)
    count += (s.dock_x == seat) + (s.dock_y == seat)
    count += s.trade.count(seat)
    count += sum(1 for owner, _ in s.shipping if owner == seat)
    count += s.bbox.count(seat)
    count += s.specialists.count(seat)
    count += s.warfare.count(seat)
    count += sum(s.disc[seat])
    count += sum(region[seat] for region in s.units)
    if s.phase == "dock":  # units taken off the dock but not landed yet
        count += sum(1 for entry in s.queue[s.cursor :] if entry[0] == seat)
    return count


def keys_of(value: Any) -> set[str]:
    """Every dictionary key anywhere inside a JSON-like value."""
    if isinstance(value, dict):
        out = {str(k) for k in value}
        for v in value.values():
            out |= keys_of(v)
        return out
    if isinstance(value, list | tuple):
        out = set()
        for v in value:
            out |= keys_of(v)
        return out
    return set()


def reveals_chance(event: Event) -> bool:
    return (
        event.secret is not None
        or event.type in REVEALING_EVENTS
        or (event.type == "good_taken" and event.data["source"] not in ("market", "region"))
    )


def public_log(events: list[Event]) -> list[dict[str, Any]]:
    return [e.redacted().to_dict() for e in events]


# --- 1. money --------------------------------------------------------------------------------


@settings(max_examples=100, **PROPERTY_SETTINGS)
@given(spec=specs)
def test_money_is_never_negative(spec: Spec) -> None:
    """Invariant (§1): every seat's money is an integer >= 0 after every decide."""
    state, _, rnd = spec.start()
    assert all(m >= 0 for m in state.money)
    for _, command in random_choices(state, rnd):
        decide_into(state, command)
        for seat, money in enumerate(state.money):
            assert type(money) is int and money >= 0, (seat, money, command, state.turn)


# --- 2. units --------------------------------------------------------------------------------


@settings(max_examples=100, **PROPERTY_SETTINGS)
@given(spec=specs)
def test_units_are_conserved(spec: Spec) -> None:
    """Invariant: for every seat, units received minus units returned to the supply equals
    the units it has in play, counted over supply, every box, the dock queue and the map;
    no count is ever negative and soldiers are a part of a seat's units in a region."""
    state, _, rnd = spec.start()

    def check(after: Command | None) -> None:
        for seat in range(state.n):
            held = state.received[seat] - state.returned[seat]
            counted = units_in_play(state, seat)
            assert held == counted, (seat, held, counted, state.phase, state.turn, after)
            assert min(state.avail[seat]) >= 0 and min(state.disc[seat]) >= 0
        for region, soldiers in zip(state.units, state.soldiers, strict=True):
            assert all(0 <= s <= u for u, s in zip(region, soldiers, strict=True)), after

    check(None)
    for _, command in random_choices(state, rnd):
        decide_into(state, command)
        check(command)


# --- 3. end of the game and scores -----------------------------------------------------------


@settings(max_examples=100, **PROPERTY_SETTINGS)
@given(spec=specs)
def test_game_ends_after_turn_eight_with_consistent_scores(spec: Spec) -> None:
    """Invariant (§3 J, §7): a game always ends after turn 8 with a final ``game_ended`` event
    holding one score row per seat (those of ``score``); each seat's colonies and discoveries
    are the VP it collected; the tie-breakers are colony VP of turn 8, money, goods.

    That places follow (total, tie-breakers) with ties sharing a place, that totals are the
    sum of the breakdown and that an ended game refuses every command is checked for every
    game by tests/games."""
    state, log = spec.play()
    assert state.phase == "over" and state.turn == 8
    assert log[-1].type == "game_ended"
    assert sum(e.type == "game_ended" for e in log) == 1
    rows = log[-1].data["scores"]
    assert rows == score(state)
    assert [row["seat"] for row in rows] == list(range(spec.players))
    rules = state.rules
    for row in rows:
        seat = row["seat"]
        assert row["colonies"] == sum(state.colony_vp[seat]), row
        assert row["discoveries"] == sum(rules.tokens[t][3] for t in state.tokens_won[seat]) + sum(
            rules.cards[c][3] for c in state.cards_won[seat]
        )
        assert row["tiebreak"] == [
            state.colony_vp[seat][2],
            state.money[seat],
            sum(state.goods[seat]),
        ], row


# --- 4. replay -------------------------------------------------------------------------------


@settings(max_examples=30, **PROPERTY_SETTINGS)
@given(spec=specs)
def test_replaying_the_log_reproduces_the_state(spec: Spec) -> None:
    """Invariant (event sourcing): the package's own ``replay``, given compiled rules or the
    bare ruleset, gives the live state's ``state_hash`` and counts every event in its
    version. (The protocol's ``replay``, a JSON round trip of the log and a fold of
    ``evolve`` are checked for every game by tests/games.)"""
    state, log = spec.play()
    live = state.state_hash()
    assert replay(spec.rules, log).state_hash() == live
    replayed = replay(RULESET, log)
    assert replayed.state_hash() == live
    assert replayed.version == len(log)


# --- 5. hidden information -------------------------------------------------------------------


def assert_no_secret_keys(state: GameState, seen: dict[str, Any]) -> None:
    """No secret key anywhere in a view; the goods pile shows only its size (rules §10
    hides its order)."""
    assert seen["goods_pile_size"] == len(state.goods_pile)
    assert not keys_of(seen) & SECRET_KEYS, keys_of(seen) & SECRET_KEYS


@settings(max_examples=30, **PROPERTY_SETTINGS)
@given(spec=specs)
def test_views_and_events_hide_hidden_values(spec: Spec) -> None:
    """Invariant (§10): at many points of a game, no seat's (nor a spectator's) ``view``
    carries a key under which the engine keeps hidden values, nor does any redacted event;
    ``determinize`` does resample hidden values. (That every view and every seat's legal
    commands are the same in ``determinize(state, k)``, and that views and redacted events
    are JSON, is checked for every game by tests/games.)"""
    state, log, rnd = spec.start()
    resampled_differs = False
    for _, command in random_choices(state, rnd):
        if rnd.random() < 0.1:
            other = determinize(state, rnd.getrandbits(64))
            resampled_differs |= other.state_hash() != state.state_hash()
            for seat in [None, *range(state.n)]:
                assert_no_secret_keys(state, json.loads(json.dumps(view(state, seat))))
        log += decide_into(state, command)
    assert resampled_differs, "determinize never changed a hidden value"
    for event in log:
        public = json.loads(json.dumps(event.redacted().to_dict()))
        bad = keys_of(public) & (SECRET_KEYS | {"secret"})
        assert not bad, (event.type, bad)
    assert_no_secret_keys(state, json.loads(json.dumps(view(state, None))))


@settings(max_examples=60, **PROPERTY_SETTINGS)
@given(
    spec=specs,
    turn=st.integers(1, 8),
    into=st.integers(0, 9),
    other_seed=st.integers(0, 2**64 - 1),
)
def test_games_differing_only_in_hidden_values_look_the_same(
    spec: Spec, turn: int, into: int, other_seed: int
) -> None:
    """Invariant (§10): take a state S during placement and S2 = determinize(S); applying the
    same commands to both gives identical views, legal commands and redacted events until a
    chance outcome (token, card, pile top, reshuffle) is revealed."""
    state, _, rnd = spec.start()
    placed = 0
    for _, command in random_choices(state, rnd):
        if state.phase == "placement" and state.turn == turn:
            if placed == into:
                break
            placed += 1
        decide_into(state, command)
    assert state.phase == "placement" and state.turn == turn, (state.phase, state.turn)
    twin = determinize(state, other_seed)
    compared = 0
    while pending(state):
        for seat in [None, *range(state.n)]:
            assert view(twin, seat) == view(state, seat), (seat, state.phase, compared)
        decisions = pending(state)
        assert pending(twin) == decisions
        seat = rnd.choice(decisions).seat
        legal = legal_commands(state, seat)
        assert legal_commands(twin, seat) == legal
        command = rnd.choice(legal)
        events, twin_events = decide_into(state, command), decide_into(twin, command)
        if any(map(reveals_chance, events + twin_events)):
            break
        assert public_log(twin_events) == public_log(events), command
        compared += 1
    assert compared >= 1


@settings(max_examples=20, **PROPERTY_SETTINGS)
@given(spec=specs, first=st.integers(0, 2**32 - 1), second=st.integers(0, 2**32 - 1))
def test_a_determinized_state_depends_on_public_information_only(
    spec: Spec, first: int, second: int
) -> None:
    """Invariant (§10, for the bots' search): ``determinize(state, k)`` is the same state
    whatever the hidden orders it replaces, so handing it to a bot with a known ``k``
    reveals nothing: resampling a resampled twin with ``k`` gives the same state hash."""
    state, _, rnd = spec.start()
    for i, (_, command) in enumerate(random_choices(state, rnd)):
        if i % 37 == 0:
            twin = determinize(state, first)
            assert determinize(twin, second).state_hash() == determinize(state, second).state_hash()
        decide_into(state, command)
