"""The registry and the catalog: what clients learn about every registered game.

The lobby validates and documents tables from these answers, so each must be usable as
given: a player range ``new_game`` enforces, a default ruleset that is shipped, an options
schema whose defaults and every offered choice compile, and a schema per command type.
"""

from __future__ import annotations

import json

import pytest

from shared.games import api
from shared.games.api import RulesetError, RuleViolation

from . import schemas

GAMES = api.names()
per_game = pytest.mark.parametrize("name", GAMES)


def test_some_game_is_registered() -> None:
    """Discovery imports every game package; an empty registry would make this suite pass
    vacuously."""
    assert api.DEFAULT_GAME in GAMES
    assert api.get(None) is api.get(api.DEFAULT_GAME)


def test_an_unknown_game_is_refused_naming_the_known_ones() -> None:
    with pytest.raises(api.UnknownGame) as refused:
        api.get("no-such-game")
    assert refused.value.known == GAMES
    for name in GAMES:
        assert name in str(refused.value)


def entry(name: str) -> api.CatalogEntry:
    (found,) = [e for e in api.catalog() if e.name == name]
    return found


@per_game
def test_the_catalog_describes_the_game(name: str) -> None:
    """The entry agrees with the game it describes, and its JSON form is JSON."""
    game, described = api.get(name), entry(name)
    assert [e.name for e in api.catalog()] == GAMES
    assert described.title and described.title == game.title
    assert (described.min_players, described.max_players) == (game.min_players, game.max_players)
    assert described.rulesets == game.rulesets()
    assert described.default_ruleset == game.default_ruleset
    assert described.bot_levels == api.bot_levels(game)
    assert {"random", "mcts"} <= set(described.bot_levels)
    for part in (described.options, described.commands):
        assert json.loads(json.dumps(part)) == part


@per_game
def test_the_player_range_is_valid_and_enforced(name: str) -> None:
    game = api.get(name)
    assert 1 <= game.min_players <= game.max_players
    rules = game.rules(game.default_ruleset)
    for players in (game.min_players, game.max_players):
        state, events = game.new_game(rules, players, seed=1)
        assert len(game.results(state)) == players
        assert len(events[0].data["players"]) == players
    for players in (game.min_players - 1, game.max_players + 1):
        with pytest.raises((RuleViolation, ValueError)):
            game.new_game(rules, players, seed=1)


@per_game
def test_every_ruleset_compiles_with_the_schema_defaults_and_every_offered_choice(
    name: str,
) -> None:
    """``rules`` accepts the defaults the options schema documents and, one at a time, every
    choice it offers; it refuses an unknown option and an unknown ruleset with a
    ``RulesetError``."""
    game = api.get(name)
    assert game.default_ruleset in game.rulesets()
    assert entry(name).options == game.options_model(game.default_ruleset).model_json_schema()
    for ruleset in game.rulesets():
        schema = game.options_model(ruleset).model_json_schema()
        properties = schema.get("properties", {})
        defaults = {key: prop["default"] for key, prop in properties.items()}
        assert set(defaults) == set(properties), "every option has a default"
        assert game.options_model(ruleset)().model_dump(mode="json") == defaults
        assert game.rules(ruleset, defaults) is not None
        assert game.rules(ruleset) is not None
        for key, prop in properties.items():
            for value in offered(prop, schema):
                assert game.rules(ruleset, {key: value}) is not None, (key, value)
        with pytest.raises(RulesetError):
            game.rules(ruleset, {"no_such_option": 1})
    with pytest.raises(RulesetError):
        game.rules("no-such-ruleset")


def offered(prop: schemas.Schema, root: schemas.Schema) -> list[object]:
    """Every value an option schema lists (enum, const, booleans)."""
    prop = schemas.resolve(prop, root)
    if "anyOf" in prop:
        return [v for s in prop["anyOf"] for v in offered(s, root)]
    if "enum" in prop:
        return list(prop["enum"])
    if "const" in prop:
        return [prop["const"]]
    return [False, True] if prop.get("type") == "boolean" else []


@per_game
def test_every_command_type_has_a_schema_that_its_wire_form_meets(name: str) -> None:
    """One schema per command type, naming its type and requiring the seat; a command's
    wire form meets its schema and parses back to the command (the wire round trip of
    commands actually played is in test_protocol)."""
    game = api.get(name)
    commands = entry(name).commands
    assert set(commands) == set(game.command_types())
    for kind, cls in game.command_types().items():
        schema = commands[kind]
        assert cls.type == kind
        assert schema["properties"]["type"] == {"const": kind}
        assert {"type", "seat"} <= set(schema["required"])
        assert schema["properties"]["seat"]["type"] == "integer"
        assert not schemas.conforms({"type": kind}, schema)
