"""Benchmark: the bots' speed on a fixed set of observations, on one core.

    python benchmarks/bots.py [--game navegador] [--players 4] [--iterations 100]
                              [--repeat 200] [--games 200] [--profile]

Plays a few seeded games at random and keeps one seat's observation at fixed decisions
(games of 2 to 5 players, or of ``--players`` only); then the ``mcts`` bot searches each for
a fixed number of iterations (so the work, and the answer, depend on the observation and the
seed alone) and the ``greedy`` bot answers each ``--repeat`` times. Then the rules core
plays ``--games`` random games (as ``caravel simulate`` does). Prints mcts iterations per
second, greedy decisions per second, random games per second and a digest of every answer:
equal digests mean equal decisions, so a change to the bots that should not change their
play can be checked by the digest alone. Rates are per second of this process's CPU time,
so a busy machine skews them less. A benchmark, not a test.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import time
from typing import Any

from services.ai import MctsBot, bot
from shared.games import api

GAMES = ((2, 11), (3, 12), (4, 13), (5, 14))  # (players, seed)
SEEDS = (13, 21, 22, 23)  # the games of ``--players``: about as many observations as GAMES
KEEP_EVERY = 40  # keep the observation of every 40th decision that offers a choice


def observations(name: str, players: int | None = None) -> list[dict[str, Any]]:
    """Observations from the start to the end of a few random games of ``name``, choices
    only: games of 2 to 5 players, or of ``players`` only."""
    game = api.get(name)
    rules = game.rules(game.default_ruleset)
    kept = []
    games = GAMES if players is None else tuple((players, seed) for seed in SEEDS)
    for players, seed in games:
        state, _ = game.new_game(rules, players, seed)
        chooser = random.Random(seed)
        choices = 0
        while decisions := game.pending(state):
            seat = decisions[0].seat
            legal = game.legal_commands(state, seat)
            if len(legal) > 1:
                choices += 1
                if choices % KEEP_EVERY == 0:
                    kept.append(game.view(state, seat))
            game.decide_into(state, chooser.choice(legal))
    return kept


def random_games(name: str, players: int, games: int) -> float:
    """Random games per second of CPU time, through the protocol like ``caravel simulate``."""
    game = api.get(name)
    rules = game.rules(game.default_ruleset)
    started = time.process_time()
    for seed in range(games):
        api.play_random_game(game, rules, players, seed, keep_log=False)
    return games / (time.process_time() - started)


def run(name: str, iterations: int, repeat: int, players: int | None, games: int) -> dict[str, Any]:
    seen = observations(name, players)
    digest = hashlib.sha256()
    searcher = MctsBot(budget_s=3600, max_iterations=iterations)
    started = time.process_time()
    for i, observation in enumerate(seen):
        digest.update(json.dumps(searcher.choose(observation, random.Random(i))).encode())
    mcts_s = time.process_time() - started
    greedy = bot("greedy")
    started = time.process_time()
    for i, observation in enumerate(seen):
        rng = random.Random(i)
        for _ in range(repeat):
            choice = greedy.choose(observation, rng)
        digest.update(json.dumps(choice).encode())
    greedy_s = time.process_time() - started
    random_players = players or 4
    return {
        "game": name,
        "observations": len(seen),
        "players": players or "2-5",
        "mcts_iterations_per_second": round(iterations * len(seen) / mcts_s, 1),
        "greedy_decisions_per_second": round(repeat * len(seen) / greedy_s, 1),
        f"random_{random_players}p_games_per_second": round(
            random_games(name, random_players, games), 1
        ),
        "seconds": round(mcts_s + greedy_s, 2),
        "digest": digest.hexdigest()[:16],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--game", default="age_of_discovery", choices=api.names())
    parser.add_argument("--players", type=int, default=None, help="positions of N seats only")
    parser.add_argument("--iterations", type=int, default=100)
    parser.add_argument("--games", type=int, default=200, help="random games of --players")
    parser.add_argument("--repeat", type=int, default=200)
    parser.add_argument("--profile", action="store_true", help="profile with pyinstrument")
    args = parser.parse_args()
    if args.profile:
        from pyinstrument import Profiler

        with Profiler() as profiler:
            result = run(args.game, args.iterations, args.repeat, args.players, args.games)
        profiler.print(show_all=False)
    else:
        result = run(args.game, args.iterations, args.repeat, args.players, args.games)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
