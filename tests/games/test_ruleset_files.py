"""A game on a ruleset given as a file, for every game: nothing after setup looks its rules
up by name (no loader knows a file's name, and a replay, a restore or a bot elsewhere has no
file at hand). The log, the snapshots and the views carry the file's content."""

from __future__ import annotations

import json
import random
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema_rs
import pytest

from shared.games import api
from shared.games.api import Event

# Per game: a figure of the standard board changed, so a game on the standard ruleset
# instead of the file's would show it.
HOUSE_EDITS = {
    "navegador": ("free_steps = 3", "free_steps = 1"),
    "age_of_discovery": ("warfare_spaces = 5", "warfare_spaces = 3"),
}
per_game = pytest.mark.parametrize("name", sorted(HOUSE_EDITS))


def house_file(name: str, folder: Path) -> Path:
    """The game's standard ruleset as a file named ``house`` with one figure changed."""
    package = api.get(name).__class__.__module__.rsplit(".", 1)[0]
    text = resources.files(package).joinpath("rulesets/standard.toml").read_text("utf-8")
    old, new = HOUSE_EDITS[name]
    assert old in text
    text = text.replace('name = "standard"', 'name = "house"', 1).replace(old, new, 1)
    path = folder / "house.toml"
    path.write_text(text, encoding="utf-8")
    return path


def through_json(value: Any) -> Any:
    return json.loads(json.dumps(value))


def house_game(name: str, folder: Path) -> tuple[api.AnyGame, Any, list[Event], Any]:
    """A 3-seat game dealt from the house file, which is then deleted (nothing may read it
    again); the file's compiled ruleset, and that no loader knows its name."""
    game = api.get(name)
    path = house_file(name, folder)
    house = game.rules(str(path)).ruleset
    state, events = game.new_game(game.rules(str(path)), 3, 5)
    path.unlink()
    with pytest.raises(api.RulesetError):
        game.rules("house")
    assert house.name == "house" and house != game.rules("standard").ruleset
    return game, state, events, house


@per_game
def test_a_game_on_a_ruleset_file_is_replayed_and_restored(name: str, tmp_path: Path) -> None:
    """A random game on the house file, played to the end: its log (through JSON) replays
    to the live state on the file's rules, and every tenth state's snapshot (through JSON)
    restores to it."""
    game, state, events, house = house_game(name, tmp_path)
    rnd = random.Random(5)
    snapshots = []
    while decisions := game.pending(state):
        seat = rnd.choice(decisions).seat
        events += game.decide_into(state, rnd.choice(game.legal_commands(state, seat)))
        if len(events) % 10 == 0:
            snapshots.append((game.state_hash(state), through_json(game.snapshot(state))))
    log = [Event.from_dict(through_json(e.to_dict())) for e in events]
    replayed = game.replay(log)
    assert replayed.rules.ruleset == house
    assert game.state_hash(replayed) == game.state_hash(state) and game.is_over(replayed)
    assert snapshots
    for digest, snapshot in snapshots:
        restored = game.restore(snapshot)
        assert restored.rules.ruleset == house and game.state_hash(restored) == digest


@per_game
def test_a_game_on_a_ruleset_file_is_sampled_and_determinized(name: str, tmp_path: Path) -> None:
    """At decisions of a random game on the house file: a state sampled from the deciding
    seat's view (through JSON, as a bot gets it) plays on the file's rules and shows the
    seat its view; a determinized twin keeps the file's rules and every view; the greedy
    policy values the seat's commands; and the views match the view schema."""
    game, state, _, house = house_game(name, tmp_path)
    check = jsonschema_rs.Draft202012Validator(game.view_schema())
    policy = game.policy()
    assert policy is not None
    rnd = random.Random(5)
    sampled = 0
    while decisions := game.pending(state):
        seat = rnd.choice(decisions).seat
        legal = game.legal_commands(state, seat)
        if rnd.random() < 0.05:
            observation = through_json(game.view(state, seat))
            check.validate(observation)
            assert len(policy(observation, rnd)) == len(legal)
            sample = game.sampler(observation).sample(rnd.getrandbits(32))
            assert sample.rules.ruleset == house
            assert through_json(game.view(sample, seat)) == observation
            twin = game.determinize(state, rnd.getrandbits(32))
            assert twin.rules.ruleset == house
            assert game.view(twin, seat) == game.view(state, seat)
            sampled += 1
        game.decide_into(state, rnd.choice(legal))
    assert sampled >= 5
