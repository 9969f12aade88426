"""Every game's ``view_schema`` describes its views exactly, for every registered game.

The OpenAPI document gives ``GET /games/{id}/view`` this schema, so clients (and generated
clients) rely on it. Two ways it could be wrong, each tested here:

- too narrow: a real view it refuses. Random games (drawn rulesets, edition options and
  player counts; see :mod:`tests.games.strategies`) are played to the end and every view,
  each seat's and the spectator's, after every decision, is validated through JSON.
  Each game lists the branches of its views these games must have reached (an auction, a
  battle, a null and a non-null of each nullable field...), so the proof is not vacuous;
- too loose: a schema that accepts anything proves nothing. Every object it describes
  forbids other keys, and real views mutated (a key added anywhere, a value replaced by an
  object, a spectator given legal commands, a seat's taken away) are refused.

Validation uses ``jsonschema_rs`` (installed with schemathesis), JSON Schema 2020-12, the
dialect of pydantic's schemas and of OpenAPI 3.1.
"""

from __future__ import annotations

import copy
import json
import random
from typing import Any

import jsonschema_rs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shared.games import api
from shared.games.api import Observation

from .strategies import PROPERTY_SETTINGS, Play, Spec, examples, per_game_property, specs

GAMES = api.names()
per_game = pytest.mark.parametrize("name", GAMES)

# Branches of a game's views (see :func:`shapes`) that the random games must reach. Rarer
# ones (an expedition to the deck, Stable and Migration in upkeep, a place won mid-auction)
# are admitted by the schema's construction but not required of these few games.
MUST_SEE: dict[str, set[str]] = {
    "age_of_discovery": {
        "seat:null",
        "seat:int",
        "legal_commands[].type:str",
        "legal_commands[].space:null",
        "legal_commands[].space:str",
        "legal_commands[].regions[]:str",
        "auction.high_bidder:null",
        "auction.high_bidder:int",
        "auction.places[]:null",
        "resolving:null",
        "resolving.queue[]:int",
        "resolving.queue[][]:int",
        "regions[].token:null",
        "regions[].token:str",
        "regions[].known_token:null",
        "boxes.dock_x:null",
        "boxes.specialists.captain:null",
        "boxes.specialists.captain:int",
        "players[].available.soldier:int",
        "players[].goods",
        "players[].tokens[].vp:int",
    },
    "navegador": {
        "seat:null",
        "seat:int",
        "legal_commands[].type:str",
        "legal_commands[].origins[]:str",
        "legal_commands[].count:int",
        "regions[].tokens:null",
        "regions[].tokens[]:int",
        "regions[].explorer:null",
        "regions[].explorer:int",
        "regions[].good:null",
        "regions[].good:str",
        "buildings[].good:null",
        "buildings[].good:str",
        "board.borders[][]:str",
        "board.columns[].coins[]:int",
        "card.marker:null",
        "card.marker:int",
        "players[].stone:null",
        "players[].stone:int",
        "next_phase:null",
        "buildings[].price:int",
        "buildings[].price:null",
        "end.final_turns_left:null",
        "end.final_turns_left:int",
        "scores[].king:str",
    },
}


def validator(game: api.AnyGame) -> Any:
    return jsonschema_rs.Draft202012Validator(game.view_schema())


def observers(play: Play) -> list[int | None]:
    return [None, *play.seats]


def wire(view: Observation) -> Any:
    """A view as a client receives it: through JSON."""
    return json.loads(json.dumps(view))


def shapes(value: Any, path: str = "") -> set[str]:
    """Every branch a JSON value takes: ``path`` for an object, ``path:type`` for a scalar
    (``null``, ``bool``, ``int``, ``str``), lists' items under ``[]``."""
    if isinstance(value, dict):
        out = {path} if path else set()
        for key, item in value.items():
            out |= shapes(item, f"{path}.{key}" if path else key)
        return out
    if isinstance(value, list):
        out = set()
        for item in value:
            out |= shapes(item, f"{path}[]")
        return out
    return {f"{path}:{'null' if value is None else type(value).__name__}"}


def objects(value: Any) -> list[dict[str, Any]]:
    """Every JSON object in a value, itself included."""
    if isinstance(value, dict):
        return [value, *(o for item in value.values() for o in objects(item))]
    if isinstance(value, list):
        return [o for item in value for o in objects(item)]
    return []


def leaves(value: Any) -> list[tuple[Any, Any]]:
    """(container, key or index) of every scalar in a value."""
    items = value.items() if isinstance(value, dict) else enumerate(value)
    out: list[tuple[Any, Any]] = []
    for key, item in items:
        if isinstance(item, dict | list):
            out += leaves(item)
        else:
            out.append((value, key))
    return out


def errors(check: Any, view: Any) -> list[str]:
    return [f"{e.instance_path}: {e.message}"[:300] for e in check.iter_errors(view)][:5]


# --- the schema -------------------------------------------------------------------------------


@per_game
def test_the_view_schema_is_a_valid_schema_whose_objects_are_closed(name: str) -> None:
    """A JSON Schema 2020-12 document, JSON itself, with every described object forbidding
    keys it does not name (a map, such as goods by name, describes its values instead)."""
    schema = api.get(name).view_schema()
    assert jsonschema_rs.meta.is_valid(schema)
    assert json.loads(json.dumps(schema)) == schema
    described = [o for o in objects(schema) if isinstance(o.get("properties"), dict)]
    assert described
    for o in described:
        if o.get("type") == "object":
            assert o.get("additionalProperties") is False, o.get("title")
    assert api.get(name).view_schema() is not api.get(name).view_schema()  # a copy each time


# --- real views match it ----------------------------------------------------------------------


@per_game
def test_every_view_of_random_games_matches_the_view_schema(name: str) -> None:
    game = api.get(name)
    check = validator(game)
    seen: set[str] = set()

    @settings(max_examples=examples(name, 16), derandomize=True, **PROPERTY_SETTINGS)
    @given(spec=specs(name))
    def play(spec: Spec) -> None:
        game_play = spec.start()

        def validate() -> None:
            for seat in observers(game_play):
                view = wire(game.view(game_play.state, seat))
                assert check.is_valid(view), (seat, game_play.decisions, errors(check, view))
                seen.update(shapes(view))

        for _, _, command in game_play.choices():
            validate()
            game_play.apply(command)
        validate()  # the game over

    play()
    missing = MUST_SEE.get(name, set()) - seen
    assert not missing, f"no random game reached these branches of the view: {sorted(missing)}"


# Simultaneous decisions (The Age of Discovery's casualty choices in a battle) are rare in
# random play, and they are where a seat's view holds a private choice: many cheap games are
# played, and at each such moment every seat in turn is made to choose first.
SCAN_GAMES = 300
MUST_SEE_SIMULTANEOUS: dict[str, set[str]] = {
    "age_of_discovery": {
        "resolving.battle.chosen[]:int",
        "resolving.battle.your_choice:int",
    },
}


@per_game
def test_views_during_simultaneous_decisions_match_the_view_schema(name: str) -> None:
    game = api.get(name)
    check = validator(game)
    seen: set[str] = set()
    low, high = game.min_players, game.max_players
    for i in range(examples(name, SCAN_GAMES)):
        spec = Spec(name, game.default_ruleset, (), low + i % (high - low + 1), i, 7 * i + 1)
        game_play = spec.start()
        for _, _, command in game_play.choices():
            pending = game.pending(game_play.state)
            if len(pending) > 1:
                for decision in pending:
                    chose = game.legal_commands(game_play.state, decision.seat)[0]
                    after = game_play.state
                    for event in game.decide(after, chose):
                        after = game.evolve(after, event)
                    for seat in observers(game_play):
                        for state in (game_play.state, after):
                            view = wire(game.view(state, seat))
                            assert check.is_valid(view), (spec, seat, errors(check, view))
                            seen.update(shapes(view))
            game_play.apply(command)
    missing = MUST_SEE_SIMULTANEOUS.get(name, set()) - seen
    assert not missing, f"no simultaneous decision reached these branches: {sorted(missing)}"


# --- and only they do -------------------------------------------------------------------------


@per_game_property(6, data=st.data())
def test_mutated_views_are_refused(name: str, data: st.DataObject) -> None:
    """At a few points of a random game, each view is accepted as it is and refused once a
    key is added to any of its objects, a scalar becomes an object, a spectator gets legal
    commands or a seat loses them."""
    game = api.get(name)
    check = validator(game)
    game_play = data.draw(specs(name)).start()
    stops = sorted(data.draw(st.lists(st.integers(0, 400), min_size=1, max_size=3)))
    rnd = random.Random(data.draw(st.integers(0, 2**32 - 1)))
    for step, (_, _, command) in enumerate(game_play.choices()):
        if stops and step >= stops[0]:
            stops.pop(0)
            for seat in observers(game_play):
                view = wire(game.view(game_play.state, seat))
                assert check.is_valid(view)
                for mutated in mutations(view, seat, rnd):
                    assert not check.is_valid(mutated), mutated
        game_play.apply(command)


def mutations(view: dict[str, Any], seat: int | None, rnd: random.Random) -> list[Any]:
    out = []
    # Each object in the view refuses an unknown key (a sample of them, always the root).
    found = objects(view)
    for index in {0, *rnd.sample(range(len(found)), min(8, len(found)))}:
        bad = copy.deepcopy(view)
        objects(bad)[index]["__unexpected__"] = {"nested": [None]}
        out.append(bad)
    # A scalar somewhere becomes an object: no scalar field of a view takes one.
    spots = leaves(view)
    for index in rnd.sample(range(len(spots)), min(8, len(spots))):
        bad = copy.deepcopy(view)
        container, key = leaves(bad)[index]
        container[key] = {"__unexpected__": 1}
        out.append(bad)
    bad = copy.deepcopy(view)
    if seat is None:  # a spectator has no legal commands, and no seat
        bad["legal_commands"] = []
        out += [bad, {**view, "seat": 0}]
    else:  # a seat always has them (empty when it has nothing to decide)
        del bad["legal_commands"]
        out += [bad, {**view, "seat": None}, {**view, "seat": str(seat)}]
    return out
