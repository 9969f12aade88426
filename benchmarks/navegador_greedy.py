"""Benchmark: Navegador's greedy policy, a table of four greedy seats and its speed.

    python benchmarks/navegador_greedy.py [--games 50] [--cap 3000]

Plays ``--games`` seeded 4-player games with every seat greedy (each cut at ``--cap``
decisions) and prints decisions and turns per player per game (median, range) and how many
were still unfinished; then times the policy alone on a fixed set of observations taken
from seeded random games (CPU time, best of 5 passes), so that a change to the policy can be
compared on the same work. A benchmark, not a test.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from typing import Any

from shared.games import api

GAME = api.get("navegador")
RULES = GAME.rules("standard")


def greedy_table(games: int, cap: int) -> dict[str, Any]:
    policy = GAME.policy()
    assert policy is not None
    decisions, turns, unfinished = [], [], 0
    for seed in range(games):
        state, _ = GAME.new_game(RULES, 4, seed)
        rnd = random.Random(seed)
        made = 0
        while (pending := GAME.pending(state)) and made < cap:
            seat = pending[0].seat
            legal = GAME.legal_commands(state, seat)
            values = policy(GAME.view(state, seat), rnd)
            GAME.decide_into(state, legal[max(range(len(legal)), key=values.__getitem__)])
            made += 1
        if not GAME.is_over(state):
            unfinished += 1
            continue
        decisions.append(made)
        turns.append(state.turn / 4)
    return {
        "games": games,
        "unfinished": unfinished,
        "decisions": _spread(decisions),
        "turns_per_player": _spread(turns),
    }


def _spread(values: list[float] | list[int]) -> dict[str, float]:
    if not values:
        return {}
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def policy_time() -> dict[str, float]:
    """Microseconds of CPU per policy call on observations of seeded random games."""
    policy = GAME.policy()
    assert policy is not None
    kept = []
    for seed in range(4):
        state, _ = GAME.new_game(RULES, 4, seed)
        chooser = random.Random(seed)
        made = 0
        while pending := GAME.pending(state):
            seat = pending[0].seat
            legal = GAME.legal_commands(state, seat)
            made += 1
            if len(legal) > 1 and made % 5 == 0:
                kept.append(GAME.view(state, seat))
            GAME.decide_into(state, chooser.choice(legal))
    rnd = random.Random(0)
    best = float("inf")
    for _ in range(5):
        started = time.process_time()
        for observation in kept:
            policy(observation, rnd)
        best = min(best, (time.process_time() - started) / len(kept))
    return {"observations": len(kept), "us_per_decision": round(best * 1e6, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--games", type=int, default=50)
    parser.add_argument("--cap", type=int, default=3000)
    args = parser.parse_args()
    print("all-greedy table:", greedy_table(args.games, args.cap))
    print("greedy policy:", policy_time())


if __name__ == "__main__":
    main()
