"""Benchmark: random games through a game's rules core on one core.

    python benchmarks/engine.py --games 300 --players 4 [--game NAME] [--profile]

Prints games per second, decisions per second and events per second. A benchmark, not a
test: nothing here passes or fails on time.
"""

from __future__ import annotations

import argparse
import json
import time

from shared.games import api


def run(games: int, players: int, seed: int, name: str = api.DEFAULT_GAME) -> dict[str, float]:
    game = api.get(name)
    rules = game.rules(game.default_ruleset)
    decisions = events = 0
    started = time.perf_counter()
    for i in range(games):
        played = api.play_random_game(game, rules, players, seed + i)
        decisions += played.decisions
        events += len(played.events)
    elapsed = time.perf_counter() - started
    return {
        "games": games,
        "players": players,
        "seconds": round(elapsed, 3),
        "games_per_second": round(games / elapsed, 1),
        "decisions_per_second": round(decisions / elapsed),
        "events_per_second": round(events / elapsed),
        "mean_decisions_per_game": round(decisions / games, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--games", type=int, default=300)
    parser.add_argument("--players", type=int, default=4)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--game", default=api.DEFAULT_GAME, choices=api.names())
    parser.add_argument("--profile", action="store_true", help="profile with pyinstrument")
    args = parser.parse_args()
    if args.profile:
        from pyinstrument import Profiler

        with Profiler() as profiler:
            result = run(args.games, args.players, args.seed, args.game)
        profiler.print(show_all=False)
    else:
        result = run(args.games, args.players, args.seed, args.game)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
