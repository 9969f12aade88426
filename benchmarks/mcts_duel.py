"""Benchmark: this checkout's ``mcts`` against another checkout's, head to head.

    python benchmarks/mcts_duel.py --old /path/to/other/checkout [--games 10] [--players 4]
                                   [--new-ms 200] [--old-ms 1000] [--seed 1]

The other checkout (say an archive of ``main``: ``git archive main | tar -x -C /tmp/main``)
plays its seats in a child process that imports only its own code, so each side is the
search as its checkout has it. Seats alternate new/old and the pattern flips every game, so
neither side keeps a seat. Each side thinks ``--new-ms`` or ``--old-ms`` of wall-clock time
per decision: both search on the same machine at the same moment, so a busy machine slows
both alike. Prints one JSON line per game and a summary: the new side's share of wins (a
shared first place splits the win) with its Wilson 95% interval. A benchmark, not a test.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import time
from typing import Any

from services.ai import MctsBot
from shared.games import api
from shared.intervals import wilson

# The child: reads one JSON request a line (an observation, a seed, a budget), answers with
# the command its mcts chooses.
CHILD = """
import json, random, sys
from services.ai import MctsBot
bot = MctsBot()
for line in sys.stdin:
    request = json.loads(line)
    choice = bot.choose(request["observation"], random.Random(request["seed"]), request["budget"])
    print(json.dumps(choice), flush=True)
"""


class OldSide:
    """The other checkout's mcts, behind a pipe."""

    def __init__(self, checkout: str) -> None:
        env = {**os.environ, "PYTHONPATH": checkout}
        self.process = subprocess.Popen(
            [sys.executable, "-c", CHILD],
            cwd=checkout,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )

    def choose(self, observation: dict[str, Any], seed: int, budget_s: float) -> dict[str, Any]:
        assert self.process.stdin is not None and self.process.stdout is not None
        request = {"observation": observation, "seed": seed, "budget": budget_s}
        self.process.stdin.write(json.dumps(request) + "\n")
        self.process.stdin.flush()
        answer: dict[str, Any] = json.loads(self.process.stdout.readline())
        return answer

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait()


def duel(game: api.AnyGame, old: OldSide, players: int, seed: int, new_s: float, old_s: float):
    """One game; returns (the new side's seats, results)."""
    rules = game.rules(game.default_ruleset)
    state, _ = game.new_game(rules, players, seed)
    new_seats = {seat for seat in range(players) if (seat + seed) % 2 == 0}
    new = MctsBot()
    rng = random.Random(seed)
    while decisions := game.pending(state):
        seat = decisions[0].seat
        observation = game.view(state, seat)
        if seat in new_seats:
            choice = new.choose(observation, rng, new_s)
        else:
            choice = old.choose(observation, rng.getrandbits(64), old_s)
        game.decide_into(state, game.parse_command(choice))
    return new_seats, game.results(state)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--old", required=True, help="the other checkout's root")
    parser.add_argument("--games", type=int, default=10)
    parser.add_argument("--players", type=int, default=4)
    parser.add_argument("--new-ms", type=float, default=200)
    parser.add_argument("--old-ms", type=float, default=1000)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    game = api.get("age_of_discovery")
    old = OldSide(args.old)
    wins = 0.0
    try:
        for g in range(args.games):
            started = time.perf_counter()
            seed = args.seed + g
            new_seats, results = duel(
                game, old, args.players, seed, args.new_ms / 1000, args.old_ms / 1000
            )
            winners = [r.seat for r in results if r.place == 1]
            won = sum(1 for seat in winners if seat in new_seats) / len(winners)
            wins += won
            totals = {r.seat: r.total for r in results}
            line = {"game": g, "seed": seed, "new_seats": sorted(new_seats), "totals": totals}
            line |= {"new_won": won, "seconds": round(time.perf_counter() - started, 1)}
            print(json.dumps(line), flush=True)
    finally:
        old.close()
    low, high = wilson(wins, args.games)
    summary = {"games": args.games, "new_ms": args.new_ms, "old_ms": args.old_ms}
    summary |= {
        "new_win_share": round(wins / args.games, 3),
        "ci95": [round(low, 3), round(high, 3)],
    }
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
