"""Bots decide from their seat's observation only, and always answer with a legal command."""

from __future__ import annotations

import json
import random
import subprocess
import sys
import threading
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from services.ai import BOTS, MctsBot, bot, service
from services.ai.arena import arena
from services.ai.bots import Bot
from services.ai.mcts import Node, Search
from services.ai.service import fallback_level
from shared.games import age_of_discovery as aod
from shared.games import api
from shared.games.age_of_discovery import AgeOfDiscovery
from shared.games.age_of_discovery.greedy import _Seen
from shared.games.base import BaseGame
from shared.intervals import wilson

from ..games.age_of_discovery.scenarios import OPTIONS

RULESET = aod.load_ruleset("standard")


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(players=st.integers(2, 5), options=OPTIONS, seed=st.integers(0, 10_000))
def test_every_answer_is_legal_and_blind_to_hidden_values(
    players: int, options: dict[str, object], seed: int
) -> None:
    """At every decision of a whole game between greedy and random bots: the observation is
    the same in a game whose hidden values were resampled, the bot's answer is the same
    there, and it is one of the seat's legal commands (so ``decide`` accepts it)."""
    rules = aod.compile_rules(RULESET, options)
    state, _ = aod.new_game(rules, None, players, seed)
    levels = [("greedy", "random")[seat % 2] for seat in range(players)]
    rng = random.Random(seed)
    while decisions := aod.pending(state):
        seat = decisions[0].seat
        observation = aod.view(state, seat)
        twin = aod.view(aod.determinize(state, rng.randrange(1 << 30)), seat)
        assert twin == observation
        pick = rng.randrange(1 << 30)
        choice = bot(levels[seat]).choose(observation, random.Random(pick))
        assert bot(levels[seat]).choose(twin, random.Random(pick)) == choice
        assert choice in observation["legal_commands"]
        aod.decide_into(state, aod.command_from_dict(choice))
    assert state.phase == "over"


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(players=st.integers(2, 5), options=OPTIONS, seed=st.integers(0, 10_000))
def test_the_search_is_blind_to_hidden_values_and_answers_legally(
    players: int, options: dict[str, object], seed: int
) -> None:
    """At decisions spread over a random game, the mcts bot (capped in iterations, so its
    answer depends on its input and seed only) gets the same observation in a game whose
    hidden values were resampled, answers the same there, and its answer is legal."""
    rules = aod.compile_rules(RULESET, options)
    state, _ = aod.new_game(rules, None, players, seed)
    rng = random.Random(seed)
    searcher = MctsBot(budget_s=60, max_iterations=25)
    asked = 0
    while decisions := aod.pending(state):
        seat = decisions[0].seat
        observation = aod.view(state, seat)
        if rng.random() < 0.05 and len(observation["legal_commands"]) > 1:
            asked += 1
            twin = aod.view(aod.determinize(state, rng.randrange(1 << 30)), seat)
            assert twin == observation
            pick = rng.randrange(1 << 30)
            choice = searcher.choose(observation, random.Random(pick))
            assert searcher.choose(twin, random.Random(pick)) == choice
            assert choice in observation["legal_commands"]
        else:
            choice = rng.choice(observation["legal_commands"])
        aod.decide_into(state, aod.command_from_dict(choice))
    assert state.phase == "over" and asked


def test_a_search_node_grows_when_none_of_its_children_is_legal_here() -> None:
    """Hidden values change what a seat may do (its money after a sampled discovery): a full
    node whose children are all illegal in this determinization adds a legal one, so the
    descent always has a child to follow; a full node with a legal child does not grow."""
    node = Node(0)
    passing, low, high = aod.Pass(0), aod.Bid(0, 1), aod.Bid(0, 2)
    node.ranked = [low, high, passing]
    node.children = {low: Node(0), high: Node(0)}
    for child in node.children.values():
        child.visits = child.available = 1  # every child is backed up the iteration it is made
    assert node.widen([passing]) == passing
    assert node.widen([passing, low]) is None
    assert node.select([passing, low]) == low


def test_the_arena_gives_searching_levels_their_budget() -> None:
    result = arena(["mcts", "random"], games=1, seed=3, budget_s=0.005)
    assert set(result["levels"]) == {"mcts", "random"}
    assert result["levels"]["mcts"]["seats_played"] == 1


def test_unknown_level_is_refused_by_name() -> None:
    assert set(BOTS) == {"random", "greedy", "mcts"}
    with pytest.raises(KeyError, match="unknown bot level 'genius'"):
        bot("genius")


def test_arena_rotates_seats_and_counts_every_game() -> None:
    result = arena(["greedy", "random", "random"], games=3, seed=5)
    levels = result["levels"]
    assert levels["greedy"]["seats_played"] == 3
    assert levels["random"]["seats_played"] == 6
    total_wins = sum(row["win_rate"] * row["seats_played"] for row in levels.values())
    assert total_wins == pytest.approx(3, abs=1e-3)
    low, high = levels["greedy"]["ci95"]
    assert 0 <= low <= levels["greedy"]["win_rate"] <= high <= 1


def test_wilson_interval() -> None:
    """Known values: 9 of 10 gives about [0.596, 0.982]; 0 of 0 is uninformative."""
    low, high = wilson(9, 10)
    assert low == pytest.approx(0.596, abs=1e-3) and high == pytest.approx(0.982, abs=1e-3)
    assert wilson(0, 0) == (0.0, 1.0)


def test_arena_command_prints_json_last() -> None:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "services.cli",
            "arena",
            "--game",
            "age_of_discovery",
            "--seats",
            "greedy,random",
            "--games",
            "2",
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout.strip().splitlines()[-1])
    assert summary["game"] == "age_of_discovery"
    assert set(summary["levels"]) == {"greedy", "random"}
    assert set(summary["levels"]["greedy"]) >= {"win_rate", "ci95", "mean_score", "latency_ms"}
    bad = subprocess.run(
        [sys.executable, "-m", "services.cli", "arena", "--seats", "greedy,oracle"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert bad.returncode != 0 and "unknown levels" in bad.stderr
    unknown = subprocess.run(
        [sys.executable, "-m", "services.cli", "arena", "--game", "chess"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert unknown.returncode != 0 and "unknown game 'chess'" in unknown.stderr


def test_arena_command_takes_a_think_budget() -> None:
    result = subprocess.run(
        [
            *(sys.executable, "-m", "services.cli", "arena", "--seats", "mcts,random"),
            *("--games", "1", "--budget-ms", "2", "--json"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout.strip().splitlines()[-1])
    assert summary["levels"]["mcts"]["seats_played"] == 1


class Unguided(AgeOfDiscovery):
    """The Age of Discovery without its greedy policy (nor its fast state form, which reads
    the same policy): how the bots meet a game that has none."""

    def __init__(self) -> None:
        super().__init__()
        self.info = replace(self.info, greedy_policy=False, state_policy=False)

    def policy(self) -> api.Policy | None:  # type: ignore[override]
        return None

    state_policy = BaseGame.state_policy  # type: ignore[assignment]


@pytest.mark.parametrize("name", api.names())
def test_every_level_a_game_lists_plays_it_legally_to_its_end(name: str) -> None:
    """Each of the game's bot levels (``mcts`` capped in iterations) plays seats of a whole
    game through the protocol, always with one of its seat's legal commands."""
    game = api.get(name)
    levels = api.bot_levels(game)
    players = max(game.min_players, min(len(levels), game.max_players))
    state, _ = game.new_game(game.rules(game.default_ruleset), players, 3)
    bots = [MctsBot(max_iterations=3) if level == "mcts" else bot(level) for level in levels]
    rng = random.Random(3)
    played = set()
    while decisions := game.pending(state):
        seat = decisions[0].seat
        observation = game.view(state, seat)
        assert observation["game"] == name
        player = bots[seat % len(bots)]
        choice = player.choose(observation, rng, 60)
        assert choice in observation["legal_commands"]
        played.add(player.level)
        game.decide_into(state, game.parse_command(choice))
    assert game.is_over(state) and played == set(levels[:players])


def test_the_levels_a_game_lists_are_bots_and_greedy_needs_a_policy() -> None:
    for name in api.names():
        game = api.get(name)
        assert set(api.bot_levels(game)) <= set(BOTS)
        assert ("greedy" in api.bot_levels(game)) == (game.policy() is not None)
    assert api.bot_levels(Unguided()) == ["random", "mcts"]
    assert fallback_level(api.get()) == "greedy" and fallback_level(Unguided()) == "random"


def test_a_search_without_a_policy_keeps_the_games_order_and_plays_out_at_random() -> None:
    """A game without a policy: the root's commands stay in the game's order, every
    iteration is backed up through one of them, and the answer is legal."""
    game = Unguided()
    state, _ = game.new_game(game.rules("standard"), 3, 5)
    observation = game.view(state, game.pending(state)[0].seat)
    legal = [game.parse_command(c) for c in observation["legal_commands"]]
    search = Search(game, observation, random.Random(5))
    choice = search.run(float("inf"), max_iterations=40)
    assert choice in legal and search.iterations == 40
    assert search.root.ranked == legal
    assert sum(child.visits for child in search.root.children.values()) == 40


def test_the_greedy_policy_prices_buildings_as_the_rules_do() -> None:
    """In games of greedy bots, every building bought cost what the policy read off the
    ruleset for that moment: the price of the age, from the ruleset, as the engine charges."""
    game = api.get()
    bought = 0
    for players, seed in ((2, 1), (4, 2), (5, 3)):
        state, _ = game.new_game(game.rules("standard"), players, seed)
        rng = random.Random(seed)
        while decisions := game.pending(state):
            observation = game.view(state, decisions[0].seat)
            choice = bot("greedy").choose(observation, rng)
            for event in game.decide_into(state, game.parse_command(choice)):
                if event.type == "building_bought":
                    assert event.data["price"] == _Seen.of_view(observation).price
                    bought += 1
    assert bought


@pytest.mark.parametrize("name", api.names())
def test_the_state_policy_values_commands_as_the_view_policy_does(name: str) -> None:
    """The search plays out with the policy read off its sampled states
    (``game.state_policy()``: the game's own fast form, or its view policy through the
    view): at every decision of random games, it gives each legal command the value the
    greedy policy gives it from the seat's view, for the same generator."""
    game = api.get(name)
    view_policy, state_policy = game.policy(), game.state_policy()
    assert view_policy is not None and state_policy is not None
    checked = 0
    for players in (game.min_players, game.max_players):
        state, _ = game.new_game(game.rules(game.default_ruleset), players, players)
        rng = random.Random(players)
        while decisions := game.pending(state):
            seat = decisions[0].seat
            legal = game.legal_commands(state, seat)
            from_view = view_policy(game.view(state, seat), random.Random(checked))
            assert state_policy(state, seat, legal, random.Random(checked)) == from_view
            checked += 1
            game.decide_into(state, rng.choice(legal))
    assert checked


def test_a_game_without_a_policy_has_no_state_policy() -> None:
    """A fast state policy is only a form of the game's policy: without one, none."""
    assert Unguided().state_policy() is None


def test_a_navegador_search_spends_its_tree_on_the_bots_own_commands() -> None:
    """Navegador's hints: the other seats play the policy in the tree as in the playouts, so
    every node below the root is the observer's, and each playout ends where the observer's
    next turn begins (or with the game). A game without hints keeps the defaults."""
    assert api.get().search_hints() == api.SearchHints()
    game = api.get("navegador")
    hints = game.search_hints()
    assert not hints.search_opponents and hints.turn_start == "turn"
    state, _ = game.new_game(game.rules("standard"), 4, 2)
    policy = game.state_policy()
    assert policy is not None
    rnd = random.Random(2)
    for _ in range(40):  # a few turns in, then the next seat with a choice
        seat = game.pending(state)[0].seat
        legal = game.legal_commands(state, seat)
        values = policy(state, seat, legal, rnd)
        game.decide_into(state, legal[max(range(len(values)), key=values.__getitem__)])
    while len(game.legal_commands(state, seat := game.pending(state)[0].seat)) < 2:
        game.decide_into(state, game.legal_commands(state, seat)[0])
    observation = game.view(state, seat)
    search = Search(game, observation, random.Random(3))
    assert search.run(float("inf"), max_iterations=60).to_dict() in observation["legal_commands"]
    nodes, below = [search.root], 0
    while nodes:
        node = nodes.pop()
        for child in node.children.values():
            assert child.seat == seat
            below += 1
            nodes.append(child)
    assert below == 60
    sampled = search.sampler.sample(7)
    search.playout(sampled, float("inf"))
    assert not game.pending(sampled) or game.pending(sampled)[0] == api.Decision(seat, "turn")


async def test_instant_bots_decide_on_the_loop_and_searches_in_a_thread() -> None:
    """Greedy and random answer at once: they decide on the event loop's thread (a thread
    for each cost a hand-over each way and the GIL kept the loop waiting all the same);
    a search thinks in a thread of its own, the loop free between its slices."""
    game = api.get("age_of_discovery")
    state, _ = game.new_game(game.rules(game.default_ruleset), 2, 1)
    seat = game.pending(state)[0].seat
    observation = game.view(state, seat)
    threads: dict[str, int] = {}

    def recorded(level: str) -> Bot:
        player = bot(level)
        choose = player.choose

        def choosing(*args: Any) -> dict[str, Any]:
            threads[level] = threading.get_ident()
            return choose(*args)

        player.choose = choosing  # type: ignore[method-assign]
        return player

    for level in ("random", "greedy", "mcts"):
        choice = await service._decided(recorded(level), observation, random.Random(1), 0.05)
        assert choice in observation["legal_commands"]
    here = threading.get_ident()
    assert threads["random"] == threads["greedy"] == here
    assert threads["mcts"] != here
