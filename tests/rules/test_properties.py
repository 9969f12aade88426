"""Property-based tests of the Age of Discovery rules core (pytest + hypothesis).

Every test draws a game: 2-5 players, a full edition option dict and a seed. The seed both
deals the game and drives a seeded ``random.Random`` that picks uniformly among the seat's
legal commands, so every test body is deterministic given its drawn arguments: a failing
example printed by hypothesis replays exactly (``Spec(...).play()`` replays the plain game).
"""

from __future__ import annotations

import dataclasses
import json
import random
from collections.abc import Iterator
from functools import cache
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from shared.games.age_of_discovery import (
    Command,
    Event,
    GameState,
    Pass,
    Rules,
    RuleViolation,
    command_from_dict,
    compile_rules,
    decide,
    decide_into,
    determinize,
    evolve,
    legal_commands,
    load_ruleset,
    new_game,
    pending,
    replay,
    score,
    view,
)
from shared.games.age_of_discovery.commands import (
    BOXES,
    COMMAND_TYPES,
    SPECIALIST_SPACES,
    UNIVERSITY_TARGETS,
)
from shared.games.age_of_discovery.ruleset import UNITS
from shared.games.age_of_discovery.state import blank_state

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


def snapshot_round_trip(state: GameState) -> GameState:
    return GameState.from_snapshot(state.rules, json.loads(json.dumps(state.to_snapshot())))


def assert_refused(state: GameState, command: Any) -> None:
    """``decide`` and ``decide_into`` refuse ``command`` with a code and leave state alone."""
    before = state.state_hash()
    with pytest.raises(RuleViolation) as refused:
        decide(state, command)
    assert isinstance(refused.value.code, str) and refused.value.code, command
    assert state.state_hash() == before, f"decide({command!r}) changed the state it refused"
    private = state.copy()
    with pytest.raises(RuleViolation) as refused:
        decide_into(private, command)
    assert isinstance(refused.value.code, str) and refused.value.code, command
    assert private.state_hash() == before, f"decide_into({command!r}) left a refused change"


def is_legal(state: GameState, command: Any) -> bool:
    return (
        isinstance(command, Command)
        and type(command.seat) is int
        and command in legal_commands(state, command.seat)
    )


def check_accepted_exactly_if_legal(state: GameState, command: Any) -> None:
    """The oracle: ``decide`` accepts exactly what ``legal_commands`` lists."""
    if is_legal(state, command):
        before = state.state_hash()
        assert decide(state, command), command
        assert state.state_hash() == before
    else:
        assert_refused(state, command)


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
    holding one score row per seat; each total is colonies + discoveries + buildings +
    economy; places follow (total, colony VP of turn 8, money, goods), ties sharing a place;
    an ended game refuses every further command."""
    state, log = spec.play()
    assert state.phase == "over" and state.turn == 8
    assert pending(state) == ()
    assert log[-1].type == "game_ended"
    assert sum(e.type == "game_ended" for e in log) == 1
    rows = log[-1].data["scores"]
    assert rows == score(state)
    assert [row["seat"] for row in rows] == list(range(spec.players))
    rules = state.rules
    for row in rows:
        seat = row["seat"]
        parts = ("colonies", "discoveries", "buildings", "economy")
        assert row["total"] == sum(row[p] for p in parts), row
        assert row["colonies"] == sum(state.colony_vp[seat]), row
        assert row["discoveries"] == sum(rules.tokens[t][3] for t in state.tokens_won[seat]) + sum(
            rules.cards[c][3] for c in state.cards_won[seat]
        )
        assert row["tiebreak"] == [
            state.colony_vp[seat][2],
            state.money[seat],
            sum(state.goods[seat]),
        ], row
    keys = [(row["total"], *row["tiebreak"]) for row in rows]
    for row, key in zip(rows, keys, strict=True):
        better = sum(1 for other in keys if other > key)
        assert row["place"] == 1 + better, (row, keys)
    assert min(row["place"] for row in rows) == 1
    for a, ka in zip(rows, keys, strict=True):
        for b, kb in zip(rows, keys, strict=True):
            assert (a["place"] == b["place"]) == (ka == kb), (a, b)
    for seat in range(spec.players):
        assert_refused(state, Pass(seat))


# --- 4. replay -------------------------------------------------------------------------------


@settings(max_examples=50, **PROPERTY_SETTINGS)
@given(spec=specs)
def test_replaying_the_log_reproduces_the_state(spec: Spec) -> None:
    """Invariant (event sourcing): ``replay`` of the whole log (with compiled rules, with the
    bare ruleset, and after a JSON round trip of every event) and a fold of the pure
    ``evolve`` from the blank state all give the live state's ``state_hash``; ``evolve``
    never changes the state it is given."""
    state, log = spec.play()
    live = state.state_hash()
    assert replay(spec.rules, log).state_hash() == live
    assert replay(RULESET, log).state_hash() == live
    stored = [Event.from_dict(json.loads(json.dumps(e.to_dict()))) for e in log]
    assert replay(spec.rules, stored).state_hash() == live
    folded = blank_state(spec.rules, spec.players)
    for i, event in enumerate(log):
        if i % 97 == 0:
            before = folded.state_hash()
            nxt = evolve(folded, event)
            assert folded.state_hash() == before, f"evolve mutated its input at {event.type}"
            folded = nxt
        else:
            folded = evolve(folded, event)
    assert folded.state_hash() == live
    assert folded.version == len(log)


# --- 5. legal commands are accepted ----------------------------------------------------------


@settings(max_examples=20, **PROPERTY_SETTINGS)
@given(spec=specs)
def test_legal_commands_are_accepted_without_mutating(spec: Spec) -> None:
    """Invariant: a pending seat always has a legal command, and ``decide`` accepts every
    command ``legal_commands`` offers (sampled), returns events and leaves its input state
    unchanged; the events it returns, folded with ``evolve``, give the same state as
    ``decide_into``; commands survive a JSON round trip through ``command_from_dict``."""
    state, _, rnd = spec.start()
    for legal, command in random_choices(state, rnd):
        before = state.state_hash()
        sample = [command, *rnd.sample(legal, min(2, len(legal)))]
        produced = [decide(state, c) for c in sample]
        assert state.state_hash() == before, f"decide mutated its input ({sample})"
        for c, events in zip(sample, produced, strict=True):
            assert events and all(isinstance(e, Event) for e in events), c
            assert command_from_dict(json.loads(json.dumps(c.to_dict()))) == c
        folded = state
        for event in produced[0]:
            folded = evolve(folded, event)
        decide_into(state, command)
        assert folded.state_hash() == state.state_hash(), command


# --- 6. malformed and foreign commands are refused -------------------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=8,
)
odd_ints = st.one_of(
    st.integers(-3, 12),
    st.sampled_from([-1, -(2**31), 2**31, 2**63, 10**30, -(10**30)]),
)


def names(state: GameState) -> st.SearchStrategy[str]:
    rules = state.rules
    known = [
        *rules.regions,
        *rules.goods,
        *(b.id for b in rules.buildings),
        *UNITS,
        *BOXES,
        *SPECIALIST_SPACES,
        *UNIVERSITY_TARGETS,
    ]
    return st.one_of(
        st.sampled_from(known),
        st.sampled_from(["", "atlantis", "Caribbean", "colonist ", "X", "Y", "gold_mine"]),
        st.text(max_size=6),
    )


def field_values(state: GameState, type_name: str) -> st.SearchStrategy[Any]:
    """Well-typed but arbitrary values for a command field (wrong types go through
    ``command_from_dict``, which must refuse them)."""
    if type_name == "int":
        return odd_ints
    if type_name == "int | None":
        return st.none() | odd_ints
    if type_name == "str":
        return names(state)
    if type_name == "str | None":
        return st.none() | names(state)
    assert type_name == "tuple[str, ...]", type_name
    return st.lists(names(state), max_size=4).map(tuple)


def seats(state: GameState) -> st.SearchStrategy[Any]:
    """Mostly seat numbers in or near range; a few that are not seats at all."""
    return st.one_of(
        st.integers(-2, state.n + 2),
        st.sampled_from([10**9, -(10**9), "0", None, 1.5, [0]]),
    )


def pending_legal(state: GameState) -> list[Command]:
    """Every legal command of every seat that must decide now."""
    return [c for d in pending(state) for c in legal_commands(state, d.seat)]


@st.composite
def arbitrary_commands(draw: st.DrawFn, state: GameState) -> Command:
    """Any command class (half the time one the pending seat could answer with), every
    field drawn at random."""
    classes = sorted(COMMAND_TYPES.values(), key=lambda c: c.type)
    answering = sorted({type(c) for c in pending_legal(state)}, key=lambda c: c.type)
    cls = draw(
        st.sampled_from(answering)
        if answering and draw(st.booleans())
        else st.sampled_from(classes)
    )
    kwargs = {
        f.name: draw(seats(state) if f.name == "seat" else field_values(state, str(f.type)))
        for f in dataclasses.fields(cls)
    }
    return cls(**kwargs)


@st.composite
def near_misses(draw: st.DrawFn, state: GameState) -> Command:
    """A legal command with one field (the seat included) replaced by an arbitrary value."""
    legal = pending_legal(state)
    if not legal:
        return draw(arbitrary_commands(state))
    command = draw(st.sampled_from(legal))
    field = draw(st.sampled_from(dataclasses.fields(command)))
    values = seats(state) if field.name == "seat" else field_values(state, str(field.type))
    return dataclasses.replace(command, **{field.name: draw(values)})


@st.composite
def foreign_commands(draw: st.DrawFn, state: GameState) -> Command:
    """A legal command of a pending seat, sent by another seat."""
    decisions = pending(state)
    seat = draw(st.sampled_from([d.seat for d in decisions]))
    command = draw(st.sampled_from(legal_commands(state, seat)))
    other = draw(st.sampled_from([s for s in range(state.n) if s != seat]))
    return dataclasses.replace(command, seat=other)


@st.composite
def raw_commands(draw: st.DrawFn, state: GameState) -> Any:
    """JSON-like garbage, and command dicts (legal ones too) with one field dropped, set to
    any JSON value, added, or a changed type."""
    bases = [c.to_dict() for c in pending_legal(state)[:50]]
    if bases and draw(st.booleans()):
        base = draw(st.sampled_from(bases))
    else:
        base = draw(arbitrary_commands(state)).to_dict()
    keys = [*base, "type", "seat", "unit", "box", "region", "amount", "extra"]
    action = draw(st.sampled_from(["anything", "drop", "set", "add", "retype"]))
    if action == "anything":
        return draw(json_values | st.dictionaries(st.sampled_from(keys), json_values))
    raw = dict(base)
    if action == "drop":
        raw.pop(draw(st.sampled_from(sorted(raw))))
    elif action == "set":
        raw[draw(st.sampled_from(sorted(raw)))] = draw(json_values)
    elif action == "add":
        raw[draw(st.text(max_size=8))] = draw(json_values)
    else:
        raw["type"] = draw(st.sampled_from([*COMMAND_TYPES, "Place", "", "noop"]) | json_values)
    return raw


DECISION_KINDS = (
    "bid",
    "specialist",
    "place",
    "land",
    "take_good",
    "buy",
    "expedition",
    "conflict",
    "casualties",
    "move",
)


@settings(max_examples=80, **PROPERTY_SETTINGS)
@given(spec=specs, kind=st.sampled_from(DECISION_KINDS), skip=st.integers(0, 6), data=st.data())
def test_malformed_and_foreign_commands_are_refused(
    spec: Spec, kind: str, skip: int, data: st.DataObject
) -> None:
    """Invariant: ``decide`` refuses, with a ``RuleViolation`` carrying a non-empty code and
    without changing the state, every command ``legal_commands`` does not offer (and accepts
    those it does): other seats' commands sent out of turn, wrong command types, unknown
    regions, goods, buildings or units, negative or huge numbers, non-commands, commands
    after the game is over; ``command_from_dict`` refuses garbage with a ``RuleViolation``
    and anything it does parse obeys the same rule.

    The probe is taken at the ``skip``-th decision of a drawn kind (the end of the game if
    there is none)."""
    state, _, rnd = spec.start()
    for _, command in random_choices(state, rnd):
        if any(d.kind == kind for d in pending(state)):
            if skip == 0:
                break
            skip -= 1
        decide_into(state, command)

    for _ in range(4):
        check_accepted_exactly_if_legal(state, data.draw(arbitrary_commands(state)))
    for _ in range(8):
        check_accepted_exactly_if_legal(state, data.draw(near_misses(state)))
    if pending(state):
        check_accepted_exactly_if_legal(state, data.draw(foreign_commands(state)))
    non_command = data.draw(
        st.one_of(st.none(), st.integers(), st.text(max_size=5), json_values)
        | st.builds(lambda c: c.to_dict(), arbitrary_commands(state))
    )
    assert_refused(state, non_command)
    for _ in range(4):
        raw = data.draw(raw_commands(state))
        try:
            parsed = command_from_dict(raw)
        except RuleViolation as refused:
            assert isinstance(refused.code, str) and refused.code, raw
            continue
        assert isinstance(parsed, Command), raw
        check_accepted_exactly_if_legal(state, parsed)


# --- 7. hidden information -------------------------------------------------------------------


def assert_no_secret_keys(state: GameState, seen: dict[str, Any]) -> None:
    """No secret key anywhere in a view; the goods pile shows only its size (rules §10
    hides its order)."""
    assert seen["goods_pile_size"] == len(state.goods_pile)
    assert not keys_of(seen) & SECRET_KEYS, keys_of(seen) & SECRET_KEYS


@settings(max_examples=30, **PROPERTY_SETTINGS)
@given(spec=specs)
def test_views_and_events_hide_hidden_values(spec: Spec) -> None:
    """Invariant (§10): at many points of a game, every seat's (and a spectator's) ``view``
    and every seat's ``legal_commands`` are the same in the state and in
    ``determinize(state, other_seed)``; views and redacted events are JSON and carry no
    secret key."""
    state, log, rnd = spec.start()
    resampled_differs = False
    for _, command in random_choices(state, rnd):
        if rnd.random() < 0.1:
            before = state.state_hash()
            other = determinize(state, rnd.getrandbits(64))
            assert state.state_hash() == before, "determinize mutated its input"
            resampled_differs |= other.state_hash() != before
            for seat in [None, *range(state.n)]:
                seen = view(state, seat)
                assert view(other, seat) == seen, (seat, state.phase, state.turn)
                assert_no_secret_keys(state, json.loads(json.dumps(seen)))
            for seat in range(state.n):
                assert legal_commands(other, seat) == legal_commands(state, seat), seat
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


# --- 8. snapshots ----------------------------------------------------------------------------


@settings(max_examples=25, **PROPERTY_SETTINGS)
@given(spec=specs)
def test_snapshot_round_trip_preserves_state_hash(spec: Spec) -> None:
    """Invariant: ``GameState.from_snapshot`` of the JSON round trip of ``to_snapshot``
    preserves ``state_hash`` at every decision and at the end of the game."""
    state, _, rnd = spec.start()
    for _, command in random_choices(state, rnd):
        assert snapshot_round_trip(state).state_hash() == state.state_hash(), state.phase
        decide_into(state, command)
    assert snapshot_round_trip(state).state_hash() == state.state_hash()


@settings(max_examples=25, **PROPERTY_SETTINGS)
@given(spec=specs)
def test_snapshot_round_trip_preserves_behaviour(spec: Spec) -> None:
    """Invariant: a state restored from a JSON snapshot behaves like the live one: same
    ``pending``, same ``legal_commands`` for every seat, and the same events and state after
    the same command (a server restoring a snapshot must be able to continue the game)."""
    state, _, rnd = spec.start()
    for _, command in random_choices(state, rnd):
        restored = snapshot_round_trip(state)
        assert pending(restored) == pending(state), (state.phase, state.turn)
        for seat in range(state.n):
            assert legal_commands(restored, seat) == legal_commands(state, seat), seat
        restored_events = decide_into(restored, command)
        events = decide_into(state, command)
        assert [e.to_dict() for e in restored_events] == [e.to_dict() for e in events]
        assert restored.state_hash() == state.state_hash()


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
