"""States sampled from a seat's view (the bots' determinizations) are faithful and blind.

For reachable states (random games stopped at random points; 2-5 players; every edition
option): a sampled state plays on to a legal finish of The Age of Discovery (turn 8).
That the sampled state shows the seat exactly its view and depends on the view alone, not
on the hidden values behind it, is checked for every game by tests/games.
"""

from __future__ import annotations

import random
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from shared.games import age_of_discovery as aod

from .scenarios import OPTIONS

RULESET = aod.load_ruleset("standard")


def reachable(options: dict[str, Any], players: int, seed: int, stop: float) -> aod.GameState:
    """A random game played to a random point (``stop``: the fraction of ~300 decisions)."""
    rules = aod.compile_rules(RULESET, options)
    state, _ = aod.new_game(rules, None, players, seed)
    rnd = random.Random(seed)
    for _ in range(int(stop * 300)):
        decisions = aod.pending(state)
        if not decisions:
            break
        seat = rnd.choice(decisions).seat
        aod.decide_into(state, rnd.choice(aod.legal_commands(state, seat)))
    return state


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    players=st.integers(2, 5),
    options=OPTIONS,
    seed=st.integers(0, 2**32 - 1),
    stop=st.floats(0, 1),
)
def test_a_sampled_state_plays_on_to_a_legal_finish(
    players: int, options: dict[str, Any], seed: int, stop: float
) -> None:
    """Every sample differs in its hidden values, yet each is a game the rules can finish."""
    state = reachable(options, players, seed, stop)
    decisions = aod.pending(state)
    seat = decisions[0].seat if decisions else 0
    sampler = aod.Sampler(state.rules, aod.view(state, seat))
    rnd = random.Random(seed)
    for k in range(2):
        sampled = sampler.sample(seed + k)
        while decisions := aod.pending(sampled):
            mover = rnd.choice(decisions).seat
            aod.decide_into(sampled, rnd.choice(aod.legal_commands(sampled, mover)))
        assert sampled.phase == "over" and sampled.turn == 8
        assert [row["seat"] for row in aod.score(sampled)] == list(range(players))
