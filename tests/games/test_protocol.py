"""The Game protocol's properties, for every registered game (pytest + hypothesis).

Each test is parametrised over ``api.names()`` and drives its game only through the
protocol, so a new game gets the whole suite by registering. Every example draws a game
(ruleset, edition options from its options schema, players, seeds; see
:mod:`tests.games.strategies`) and plays it with a seeded random player.

Hidden information, generically. A game's rules know which values are hidden; this suite
does not, so it compares a state with ``determinize(state, k)``, a twin that differs in
hidden values alone:

- every view (each seat's and the spectator's), the pending decisions and every seat's
  legal commands are identical in the twins;
- the twins then take the same commands while their redacted events agree. A step may
  reveal a hidden value (a drawn token, a card, the top of a pile), and then the twins'
  public information legitimately parts. A step whose redacted events are identical in both
  twins must leave every view identical: the whole public log is then the same, so a view
  that differs shows a value no event carried (a leak into the views). The converse (every
  view identical after a step, so identical events) is not a property: an event may name
  which of two pieces that look the same was revealed (The Age of Discovery's expedition
  event carries the token's ``index``; ``determinize`` relabels tokens with equal faces),
  and a value may be revealed and hidden again in one step (a card drawn for a failed
  expedition and shuffled back into the deck: the event shows it, no view keeps it), which
  are no leaks. The literal check below covers what the converse was after. The walk
  stops at the first difference, or after a few steps, and a new twin is drawn later in
  the game. Which events may reveal a value is the game's business, tested by the game's
  own suite (tests/games/age_of_discovery for The Age of Discovery);
- literally: no redacted event and no view carries a distinctive value of a secret part
  (a large integer such as a seed or a generator state, a long sequence of many distinct
  items such as a pile or deck order). Such values do not turn up in public data by
  coincidence, so finding one there is a leak, whatever the game;
- a state sampled from a seat's view (what a search bot plays in) shows that seat exactly
  its view, depends on the view alone, and plays on to a legal finish.
"""

from __future__ import annotations

import dataclasses
import json
import random
from typing import Any

import pytest
from hypothesis import strategies as st

from shared.games import api
from shared.games.api import Command, Event, Observation, RuleViolation, command_schema
from shared.views import seat_part

from . import schemas
from .strategies import MAX_DECISIONS, SEEDS, Play, per_game_property, specs

GAMES = api.names()
per_game = pytest.mark.parametrize("name", GAMES)


# --- helpers ---------------------------------------------------------------------------------


def wire(command: Command) -> Any:
    """A command as a client sends it: its wire form through JSON."""
    return json.loads(json.dumps(command.to_dict()))


def dicts(events: list[Event]) -> list[dict[str, Any]]:
    return [e.to_dict() for e in events]


def public(events: list[Event]) -> list[dict[str, Any]]:
    return [e.redacted().to_dict() for e in events]


def observers(play: Play) -> list[int | None]:
    """The spectator and every seat."""
    return [None, *play.seats]


def all_views(play: Play, state: Any) -> list[Observation]:
    return [play.game.view(state, seat) for seat in observers(play)]


def all_legal(play: Play, state: Any) -> list[list[Command]]:
    return [play.game.legal_commands(state, seat) for seat in play.seats]


def assert_refused(play: Play, command: Any) -> None:
    """``decide`` and ``decide_into`` refuse ``command`` with a code and change nothing."""
    game, state = play.game, play.state
    before = game.state_hash(state)
    for decide in (game.decide, game.decide_into):
        with pytest.raises(RuleViolation) as refused:
            decide(state, command)
        assert isinstance(refused.value.code, str) and refused.value.code, command
        assert game.state_hash(state) == before, f"{decide.__name__}({command!r}) changed state"


def is_legal(play: Play, command: Any) -> bool:
    return (
        isinstance(command, Command)
        and type(command.seat) is int
        and command.seat in play.seats
        and command in play.game.legal_commands(play.state, command.seat)
    )


def check_accepted_exactly_if_legal(play: Play, command: Any) -> None:
    """The oracle: ``decide`` accepts exactly what ``legal_commands`` lists, and leaves the
    state unchanged either way."""
    if not is_legal(play, command):
        assert_refused(play, command)
        return
    before = play.state_hash()
    assert play.game.decide(play.state, command), command
    assert play.state_hash() == before


# --- 1. replay -------------------------------------------------------------------------------


@per_game_property(20, data=st.data())
def test_replaying_the_log_gives_the_live_state(name: str, data: st.DataObject) -> None:
    """Invariant (event sourcing): ``replay`` of the log so far gives the live state's hash
    at random points; at the end so does ``replay`` of the events as JSON taken when they
    were produced (what the store keeps: a later change to a logged event would show), and
    a fold of ``evolve`` from ``initial``; ``evolve`` never changes the state it is given."""
    play = data.draw(specs(name)).start()
    game = play.game
    stored = [json.dumps(e.to_dict()) for e in play.log]
    for _, _, command in play.choices():
        if play.rnd.random() < 0.03:
            assert game.state_hash(game.replay(play.log)) == play.state_hash(), len(play.log)
        stored += [json.dumps(e.to_dict()) for e in play.apply(command)]
    live = play.state_hash()
    assert game.state_hash(game.replay(Event.from_dict(json.loads(e)) for e in stored)) == live
    folded = game.initial(play.log[0])
    for i, event in enumerate(play.log):
        if i % 23:
            folded = game.evolve(folded, event)
            continue
        before = game.state_hash(folded)
        after = game.evolve(folded, event)
        assert game.state_hash(folded) == before, f"evolve changed its input at {event.type}"
        folded = after
    assert game.state_hash(folded) == live


# --- 2. legal commands are accepted ----------------------------------------------------------


@per_game_property(12, data=st.data())
def test_legal_commands_are_accepted_and_decide_changes_nothing(
    name: str, data: st.DataObject
) -> None:
    """Invariant: ``decide`` accepts every command ``legal_commands`` offers a pending seat
    (a few sampled at every decision), returns events and leaves the state unchanged;
    ``decide_into`` returns the same events, and so does (at some decisions) a fold of
    ``decide``'s events with ``evolve`` and ``decide_into(..., trusted=True)`` (which skips
    validating the command) on a copy, to the same state; a legal command's wire form meets
    its type's schema and ``parse_command`` of its JSON round trip gives the command back."""
    play = data.draw(specs(name)).start()
    game = play.game
    shapes = {kind: command_schema(cls) for kind, cls in game.command_types().items()}
    for seat, legal, command in play.choices():
        before = play.state_hash()
        sample = [command, *play.rnd.sample(legal, min(2, len(legal)))]
        produced = [game.decide(play.state, c) for c in sample]
        assert play.state_hash() == before, f"decide changed its input ({sample})"
        for c, events in zip(sample, produced, strict=True):
            assert c.seat == seat, c
            assert events and all(isinstance(e, Event) for e in events), c
            assert schemas.conforms(wire(c), shapes[c.type]), (wire(c), shapes[c.type])
            assert game.parse_command(wire(c)) == c
        folded = None
        if play.rnd.random() < 0.1:
            folded = play.state
            for event in produced[0]:
                folded = game.evolve(folded, event)
        trusted = None
        if play.rnd.random() < 0.2:
            trusted = game.restore(game.snapshot(play.state))
            trusted_events = game.decide_into(trusted, command, trusted=True)
            assert dicts(trusted_events) == dicts(produced[0]), command
        assert dicts(play.apply(command)) == dicts(produced[0]), command
        if folded is not None:
            assert game.state_hash(folded) == play.state_hash(), command
        if trusted is not None:
            assert game.state_hash(trusted) == play.state_hash(), command


# --- 3. refused commands change nothing ------------------------------------------------------

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
junk_strings = st.sampled_from(["", "X", "atlantis", "None", "0", " "]) | st.text(max_size=6)
not_seats = st.sampled_from(["0", None, 1.5, [0], 10**9, -(10**9), "seat 0"])


def strings_in(value: Any) -> set[str]:
    """Every string (keys included) inside a JSON-like value."""
    if isinstance(value, str):
        return {value}
    if isinstance(value, dict):
        return {str(k) for k in value} | {s for v in value.values() for s in strings_in(v)}
    if isinstance(value, list | tuple):
        return {s for v in value for s in strings_in(v)}
    return set()


def ints_in(value: Any) -> set[int]:
    """Every integer (not bool) inside a JSON-like value."""
    if isinstance(value, bool):
        return set()
    if isinstance(value, int):
        return {value}
    if isinstance(value, dict):
        return {i for v in value.values() for i in ints_in(v)}
    if isinstance(value, list | tuple):
        return {i for v in value for i in ints_in(v)}
    return set()


@dataclasses.dataclass
class Probe:
    """What the garbage at one decision point is made of: the command schemas, the
    commands pending seats could send, and the names and numbers the game uses (from the
    spectator's view, the legal commands of some decisions and the event data so far),
    beside junk."""

    play: Play
    shapes: dict[str, schemas.Schema]
    legal: list[Command]
    strings: st.SearchStrategy[str]
    ints: st.SearchStrategy[int]

    @classmethod
    def at(cls, play: Play, shapes: dict[str, schemas.Schema], seen: set[str]) -> Probe:
        game, state = play.game, play.state
        legal = [c for d in game.pending(state) for c in game.legal_commands(state, d.seat)]
        names = sorted(seen | strings_in(game.view(state, None)))
        numbers = sorted({n + d for n in ints_in([wire(c) for c in legal]) for d in (-1, 0, 1)})
        return cls(
            play,
            shapes,
            legal,
            (st.sampled_from(names) if names else st.nothing()) | junk_strings,
            (st.sampled_from(numbers) if numbers else st.nothing()) | odd_ints,
        )

    def value(self, schema: schemas.Schema) -> st.SearchStrategy[Any]:
        """A value of the schema's type, in range or not."""
        return schemas.values(schema, schema, self.strings, self.ints)

    def seat(self) -> st.SearchStrategy[int]:
        return st.integers(-2, self.play.players + 1)


@st.composite
def typed_commands(draw: st.DrawFn, probe: Probe) -> dict[str, Any]:
    """A wire command that meets its schema: any command type (half the time one a pending
    seat could answer with) with every field drawn; or a legal one with one field (the seat
    included) redrawn; or a legal one sent by another seat."""
    how = draw(st.sampled_from(["any", "near", "foreign"] if probe.legal else ["any"]))
    if how == "any":
        answering = sorted({c.type for c in probe.legal})
        own_kind: bool = bool(answering) and draw(st.booleans())
        kinds = answering if own_kind else sorted(probe.shapes)
        shape = probe.shapes[draw(st.sampled_from(kinds))]
        drawn = {"type": shape["properties"]["type"]["const"], "seat": draw(probe.seat())}
        for key, prop in shape["properties"].items():
            if key not in drawn and (key in shape["required"] or draw(st.booleans())):
                drawn[key] = draw(probe.value(prop))
        return drawn
    raw: dict[str, Any] = wire(draw(st.sampled_from(probe.legal)))
    if how == "foreign":
        raw["seat"] = draw(st.sampled_from([s for s in probe.play.seats if s != raw["seat"]]))
        return raw
    key = draw(st.sampled_from(sorted(set(raw) - {"type"})))
    prop = probe.shapes[raw["type"]]["properties"][key]
    raw[key] = draw(probe.seat() if key == "seat" else probe.value(prop))
    return raw


@st.composite
def mangled_commands(draw: st.DrawFn, probe: Probe) -> Any:
    """JSON garbage, and wire commands with a field dropped, set to any JSON value, added,
    or a changed type."""
    raw = draw(typed_commands(probe))
    keys = [*raw, "type", "seat", "extra"]
    how = draw(st.sampled_from(["anything", "drop", "set", "add", "retype"]))
    if how == "anything":
        return draw(json_values | st.dictionaries(st.sampled_from(keys), json_values))
    if how == "drop":
        raw.pop(draw(st.sampled_from(sorted(raw))))
    elif how == "set":
        raw[draw(st.sampled_from(sorted(raw)))] = draw(json_values)
    elif how == "add":
        raw[draw(st.text(max_size=8))] = draw(json_values)
    else:
        raw["type"] = draw(st.sampled_from([*probe.shapes, "", "noop"]) | json_values)
    return raw


def check_wire(probe: Probe, raw: Any, typed: bool) -> None:
    """``parse_command`` parses what meets a command schema (and refuses the rest with a
    code); whatever it parses obeys the oracle."""
    try:
        command = probe.play.game.parse_command(raw)
    except RuleViolation as refused:
        assert not typed, f"{raw} meets its schema, yet: {refused}"
        assert isinstance(refused.code, str) and refused.code, raw
        return
    assert isinstance(command, Command), raw
    assert schemas.conforms(wire(command), probe.shapes[command.type]), raw
    check_accepted_exactly_if_legal(probe.play, command)


def check_probe(probe: Probe, data: st.DataObject) -> None:
    """Garbage of every kind at one point of the game: through the wire and as objects."""
    play = probe.play
    pending_seats = {d.seat for d in play.game.pending(play.state)}
    for seat in play.seats:
        if seat not in pending_seats:
            assert play.game.legal_commands(play.state, seat) == [], f"seat {seat} not pending"
    for _ in range(4):
        check_wire(probe, data.draw(typed_commands(probe)), typed=True)
    for _ in range(2):
        check_wire(probe, data.draw(mangled_commands(probe)), typed=False)
    if probe.legal:
        not_a_seat: Any = data.draw(not_seats)
        odd_seat = dataclasses.replace(data.draw(st.sampled_from(probe.legal)), seat=not_a_seat)
        assert_refused(play, odd_seat)
    assert_refused(play, data.draw(json_values | st.builds(object)))


@per_game_property(20, data=st.data())
def test_refused_commands_change_nothing(name: str, data: st.DataObject) -> None:
    """Invariant: at the first decision of every kind, at random decisions and after the
    end, ``decide`` (and ``decide_into``) refuse, with a ``RuleViolation`` carrying a code and
    without changing the state, every command ``legal_commands`` does not offer, and accept
    those it does: commands of seats that are not pending, commands of the wrong type, names
    the game does not know or uses elsewhere, numbers out of range, seats that are not seats,
    non-commands; ``parse_command`` refuses malformed wire forms with a ``RuleViolation``
    and parses every wire form that meets its command schema. A seat that is not pending
    has no legal command."""
    play = data.draw(specs(name)).start()
    game = play.game
    shapes = {kind: command_schema(cls) for kind, cls in game.command_types().items()}
    kinds: set[str] = set()
    seen: set[str] = set()
    for _, legal, command in play.choices():
        new = {d.kind for d in game.pending(play.state)} - kinds
        if new or play.rnd.random() < 0.015:
            kinds |= new
            check_probe(Probe.at(play, shapes, seen), data)
        if play.rnd.random() < 0.2:
            seen |= strings_in([c.to_dict() for c in legal])
        seen |= strings_in([e.data for e in play.apply(command)])
    check_probe(Probe.at(play, shapes, seen), data)


# --- 4. hidden information -------------------------------------------------------------------


WALK = 10
"""Steps a twin walks beside the state before a fresh one is drawn."""


def twin_of(play: Play, seed: int) -> Any:
    """``determinize(state, seed)``, checked to change nothing public and not its input."""
    game, state = play.game, play.state
    before = play.state_hash()
    twin = game.determinize(state, seed)
    assert play.state_hash() == before, "determinize changed its input"
    seen = all_views(play, state)
    assert all_views(play, twin) == seen, (game.pending(state), seed)
    assert json.loads(json.dumps(seen)) == seen, "a view is not JSON"
    assert_nothing_secret_in(seen, secret_values(play.log), "a view")
    assert list(game.pending(twin)) == list(game.pending(state))
    assert all_legal(play, twin) == all_legal(play, state)
    return twin


def distinctive(value: Any) -> set[Any]:
    """The values inside ``value`` that would not turn up elsewhere by coincidence: large
    integers (generator states, seeds) and long sequences of many distinct items (pile and
    deck orders), sequences as tuples."""
    if isinstance(value, bool):
        return set()
    if isinstance(value, int):
        return {value} if abs(value) >= 2**20 else set()
    if isinstance(value, dict):
        return {d for v in value.values() for d in distinctive(v)}
    if isinstance(value, list | tuple):
        out = {d for v in value for d in distinctive(v)}
        try:
            if len(value) >= 6 and len(set(value)) >= 4:
                out.add(tuple(value))
        except TypeError:  # unhashable items: a sequence of sequences
            pass
        return out
    return set()


def secret_values(log: list[Event]) -> set[Any]:
    """Distinctive values of the log's secret parts that no public part carries."""
    hidden = {d for e in log if e.secret is not None for d in distinctive(e.secret)}
    return hidden - {d for e in log for d in distinctive(e.data)}


def assert_nothing_secret_in(value: Any, hidden: set[Any], where: str) -> None:
    leaked = distinctive(value) & hidden
    assert not leaked, f"{where} carries values only the secret parts hold: {leaked}"


def check_public_log(play: Play) -> None:
    """Redacted events are JSON, carry no secret part and no distinctive value of one, and
    are seen by all or one seat."""
    hidden = {d for e in play.log if e.secret is not None for d in distinctive(e.secret)}
    for event in play.log:
        public_form = event.redacted().to_dict()
        assert "secret" not in public_form and event.redacted().secret is None, event.type
        assert json.loads(json.dumps(public_form)) == public_form, event.type
        assert event.visibility == api.PUBLIC or event.visibility in play.seats, event
        assert_nothing_secret_in(public_form, hidden, f"public event {event.type}")


@per_game_property(20, data=st.data())
def test_hidden_values_reach_no_view_and_no_public_event(name: str, data: st.DataObject) -> None:
    """Invariant (hidden information; see the module's docstring): at random points of a
    game, every view, the pending decisions and every seat's legal commands are the same in
    the state and in ``determinize(state, k)`` for two seeds, and views are JSON; walking
    the state and a twin on with the same commands, identical redacted events leave every
    view identical; no view and no redacted event holds a distinctive secret value; redacted
    events are JSON with no secret part."""
    play = data.draw(specs(name)).start()
    game = play.game
    twin, stepped, steps = None, 0, 0
    for _, _, command in play.choices():
        if twin is None and (play.decisions == 0 or play.rnd.random() < 0.04):
            twin_of(play, data.draw(SEEDS))
            twin, steps = twin_of(play, data.draw(SEEDS)), 0
        events = play.apply(command)
        if twin is None:
            continue
        steps += 1
        stepped += 1
        twin_events = game.decide_into(twin, command)
        same_events = public(twin_events) == public(events)
        if same_events:
            same_views = all_views(play, twin) == all_views(play, play.state)
            assert same_views, f"a view shows what no public event carried ({command})"
        if not same_events or steps == WALK:
            twin = None
    twin_of(play, data.draw(SEEDS))
    check_public_log(play)
    assert stepped or not play.decisions, "no twin ever took a step"


@per_game_property(20, data=st.data(), stop=st.floats(0, 1), seed=SEEDS)
def test_a_sampled_state_shows_the_seat_its_view_and_plays_on(
    name: str, data: st.DataObject, stop: float, seed: int
) -> None:
    """Invariant (the search bots' determinizations): at a random point of a game (the
    state replayed from a prefix of the log), for every seat, a state sampled from the
    seat's view as JSON shows the seat exactly its view; it depends on the view and the
    seed alone (the same from a determinized twin's view, and twice the same); and one
    sample plays on at random to a legal finish."""
    full = data.draw(specs(name)).start()
    ends = []
    for _, _, command in full.choices():
        full.apply(command)
        ends.append(len(full.log))
    game = full.game
    cut = ends[int(stop * (len(ends) - 1))] if ends else len(full.log)
    play = Play(game, game.replay(full.log[:cut]), full.log[:cut], full.rnd, full.players)
    twin = game.determinize(play.state, seed + 1)
    for seat in play.seats:
        seen = game.view(play.state, seat)
        sampler = game.sampler(json.loads(json.dumps(seen)))
        sampled = sampler.sample(seed)
        assert game.view(sampled, seat) == seen, seat
        assert game.view(sampler.sample(seed + 1), seat) == seen, seat
        again = game.sampler(json.loads(json.dumps(game.view(twin, seat)))).sample(seed)
        assert game.state_hash(again) == game.state_hash(sampled), seat
    pending = game.pending(play.state)
    seat = pending[0].seat if pending else 0
    sampled = game.sampler(game.view(play.state, seat)).sample(seed)
    check_finish(Play(game, sampled, [], full.rnd, full.players).finish())


# --- 5. snapshots ----------------------------------------------------------------------------


def restored(play: Play) -> Any:
    """The live state through a JSON round trip of its snapshot, as a server reloads it."""
    return play.game.restore(json.loads(json.dumps(play.game.snapshot(play.state))))


@per_game_property(15, data=st.data())
def test_a_restored_snapshot_plays_on_identically(name: str, data: st.DataObject) -> None:
    """Invariant: a state restored from the JSON round trip of its snapshot has the live
    state's hash, pending decisions and legal commands, and plays on identically: the same
    events and state after the next command (checked at random decisions, and at the end)."""
    play = data.draw(specs(name)).start()
    game = play.game
    for _, _, command in play.choices():
        if play.rnd.random() > 0.15:
            play.apply(command)
            continue
        copy = restored(play)
        assert game.state_hash(copy) == play.state_hash()
        assert list(game.pending(copy)) == list(game.pending(play.state))
        assert all_legal(play, copy) == all_legal(play, play.state)
        copy_events = game.decide_into(copy, command)
        assert dicts(copy_events) == dicts(play.apply(command)), command
        assert game.state_hash(copy) == play.state_hash(), command
    copy = restored(play)
    assert game.state_hash(copy) == play.state_hash()
    assert game.is_over(copy)


# --- 6. games end ----------------------------------------------------------------------------


def check_results(play: Play) -> None:
    """Every seat has one result; each total is the sum of its breakdown; places run from
    1 and follow (total, tie-breakers), equal keys sharing a place."""
    results = play.game.results(play.state)
    assert sorted(r.seat for r in results) == list(play.seats), results
    keys = {r.seat: (r.total, *r.tiebreak) for r in results}
    for r in results:
        assert sum(r.breakdown.values()) == r.total, r
        better = sum(1 for k in keys.values() if k > keys[r.seat])
        assert r.place == 1 + better, (r, keys)
        assert 1 <= r.place <= play.players
    best = max(r.total for r in results)
    assert all(r.total == best for r in results if r.place == 1), results


def check_finish(play: Play) -> None:
    """A game that is over asks nobody for anything, offers nothing, refuses everything
    and has final results."""
    game = play.game
    assert game.is_over(play.state)
    if play.log:  # a state sampled from a view has no log of its own
        assert play.log[-1].type == api.GAME_ENDED
    assert list(game.pending(play.state)) == []
    assert all_legal(play, play.state) == [[] for _ in play.seats]
    check_results(play)


@per_game_property(25, data=st.data())
def test_random_play_ends_with_results_for_every_seat(name: str, data: st.DataObject) -> None:
    """Invariant: a log starts with ``game_created`` naming the game, ruleset, options and
    players; a game is over exactly when nobody must decide; random play ends it within
    ``MAX_DECISIONS``; results are consistent at random points and final at the end, where
    nothing is pending or legal and every command, even the last one played, is refused."""
    spec = data.draw(specs(name))
    play = spec.start()
    game = play.game
    created = play.log[0]
    assert created.type == "game_created"
    assert created.data["game"] == name and api.of(play.state) is game
    assert created.data["ruleset"] == spec.ruleset
    assert len(created.data["players"]) == spec.players
    assert (
        game.options_model(spec.ruleset)(**dict(spec.options)).model_dump(mode="json")
        == (created.data["options"])
    )
    last = None
    for _, _, command in play.choices():
        assert not game.is_over(play.state)
        if play.rnd.random() < 0.02:
            check_results(play)
        play.apply(command)
        last = command
    assert play.decisions <= MAX_DECISIONS
    check_finish(play)
    if last is not None:
        assert_refused(play, last)


# --- the view split and the game's declarations ----------------------------------------------


@per_game_property(10, data=st.data())
def test_a_seats_view_is_the_public_view_with_its_own_part_over_it(
    name: str, data: st.DataObject
) -> None:
    """Invariant (what the views projection stores: one public view per event, a small part
    per seat): at random points of a game, the public view is the spectator's view and
    carries no legal commands; each seat's view is the public view with the seat's private
    part set over it; the private part holds exactly the fields where the seat's view differs
    from the public one (``seat_part`` of the two finds it again, nothing more), its number
    and its legal commands among them; and anything else it sets is a public field the seat
    sees more of, never a field the public view lacks."""
    play = data.draw(specs(name)).start()
    game = play.game
    checked = 0
    for _, _, command in play.choices():
        if play.decisions == 0 or play.rnd.random() < 0.05:
            public_view = game.public_view(play.state)
            assert public_view == game.view(play.state, None)
            assert public_view["seat"] is None and "legal_commands" not in public_view
            for seat in play.seats:
                private = game.private_view(play.state, seat)
                seat_view = game.view(play.state, seat)
                assert api.merge_views(public_view, private) == seat_view
                assert seat_part(public_view, seat_view) == {"set": private}
                legal = [c.to_dict() for c in game.legal_commands(play.state, seat)]
                assert private["seat"] == seat and private["legal_commands"] == legal
                assert set(private) - {"seat", "legal_commands"} <= set(public_view), private
            checked += 1
        play.apply(command)
    assert checked


def contained(part: Any, whole: Any) -> bool:
    """``part`` is ``whole`` with some dictionaries' keys left out (lists keep their
    length): every value ``part`` holds is ``whole``'s at the same place."""
    if isinstance(part, dict):
        return isinstance(whole, dict) and all(
            k in whole and contained(v, whole[k]) for k, v in part.items()
        )
    if isinstance(part, list):
        return (
            isinstance(whole, list)
            and len(part) == len(whole)
            and all(contained(a, b) for a, b in zip(part, whole, strict=True))
        )
    return bool(part == whole and type(part) is type(whole))


POLICY_VIEWS = ("age_of_discovery", "navegador")
"""The games that have a policy view (their greedy seats are sent it, not the whole view)."""


@per_game_property(10, data=st.data())
def test_a_policy_view_is_part_of_the_seats_view_and_decides_alike(
    name: str, data: st.DataObject
) -> None:
    """Invariant (hidden information, for the view the engine sends a greedy bot seat,
    ``Game.policy_view``): at random points of a game, each seat's policy view holds only
    values of that seat's own view, at the same places (so never a hidden one, nor another
    seat's private part), and the greedy policy, given it with the legal commands, values
    every command as it does from the whole view (same generator seed). Each game of
    :data:`POLICY_VIEWS` has one (before Navegador's, its greedy seats got the whole view
    and this passed it by)."""
    play = data.draw(specs(name)).start()
    game = play.game
    policy = game.policy()
    checked = 0
    for _, _, command in play.choices():
        if play.decisions == 0 or play.rnd.random() < 0.1:
            for seat in play.seats:
                part = game.policy_view(play.state, seat)
                if part is None:
                    continue
                view = game.view(play.state, seat)
                assert contained(part, view), (seat, part)
                assert json.loads(json.dumps(part)) == part
                legal = view["legal_commands"]
                if policy is not None and legal:
                    whole = policy(view, random.Random(seat))
                    assert policy({**part, "legal_commands": legal}, random.Random(seat)) == whole
                checked += 1
        play.apply(command)
    assert checked or name not in POLICY_VIEWS


@per_game
def test_turn_positions_rank_every_seat_once_and_replay(name: str) -> None:
    """``turn_positions``: a 0-based place for each seat, each place once, the same in the
    live state of a finished game and in its replayed log."""
    game = api.get(name)
    for players in (game.min_players, game.max_players):
        played = api.play_random_game(game, game.rules(game.default_ruleset), players, 11)
        positions = game.turn_positions(played.state)
        assert sorted(positions) == list(range(players))
        assert game.turn_positions(game.replay(played.events)) == positions


@per_game
def test_the_game_info_declares_what_the_game_has(name: str) -> None:
    """The catalog and the bots read a game's declared parts: a declared greedy policy is
    there, the player range is the default ruleset's, the catalog lists the declarations."""
    game = api.get(name)
    info = game.info
    assert info.name == game.name == name
    assert (game.policy() is not None) == info.greedy_policy
    assert (game.state_policy() is not None) == info.greedy_policy
    assert info.search_hints or game.search_hints() == api.SearchHints()
    assert 1 <= info.min_players <= info.max_players
    entry = next(e for e in api.catalog() if e.name == name)
    assert (entry.chance, entry.hidden_information, entry.board) == (
        info.chance,
        info.hidden_information,
        info.board,
    )


def test_the_registry_refuses_a_game_that_declares_a_policy_it_lacks() -> None:
    """A ``GameInfo`` that lists a greedy policy the game does not have would offer clients a
    bot level that cannot play: registering it fails, and nothing is registered."""
    game = api.get()
    liar = dataclasses.replace(game.info, name="liar", greedy_policy=False)

    class Liar(type(game)):  # type: ignore[misc]
        pass

    lying = Liar()
    lying.info = liar
    with pytest.raises(ValueError, match="greedy_policy"):
        api.register(lying, type(None))
    assert "liar" not in api.names()


@per_game_property(10, data=st.data())
def test_every_event_matches_its_declared_class(name: str, data: st.DataObject) -> None:
    """Invariant (typed events): every event a random game emits, ``game_created`` to
    ``game_ended``, has a declared class (``event_types()``) and its data validates against
    it strictly (no missing, unknown or mistyped field); every type the game's event
    handlers apply is declared, and every declared type has a handler."""
    play = data.draw(specs(name)).start().finish()
    types = play.game.event_types()
    for event in play.log:
        assert api.check_event(event, types) is None, api.check_event(event, types)
    assert set(types) == set(play.game.handlers.table)  # type: ignore[attr-defined]
    for cls in types.values():
        schema = api.event_schema(cls)
        assert schema["title"] == cls.type and schema["x-version"] == cls.version


def test_an_event_that_drifts_from_its_class_is_caught() -> None:
    """The check is strict: a missing field, an unknown one or a mistyped one is named."""
    types = api.get("navegador").event_types()
    good = Event("colony_founded", {"seat": 1, "region": "brazil", "good": "sugar", "price": 2})
    assert api.check_event(good, types) is None
    for bad in (
        {"seat": 1, "region": "brazil", "good": "sugar"},
        {"seat": 1, "region": "brazil", "good": "sugar", "price": 2, "extra": 0},
        {"seat": "1", "region": "brazil", "good": "sugar", "price": 2},
    ):
        assert api.check_event(Event("colony_founded", bad), types) is not None
    assert api.check_event(Event("no_such_event", {}), types) is not None
