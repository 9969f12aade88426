"""What a bot seat's own view costs the engine (issue 24, branch ``botview6``): CPU time of
``own_view_json`` (the view the engine puts in a bot seat's decision request) against the
request itself and the views projection's ``view_documents`` (public view and every seat's
part, made per event before), over random states of 4-seat games.

    python benchmarks/bot_views.py [--states 600] [--players 4]
"""

from __future__ import annotations

import argparse
import random
import time
from collections.abc import Callable
from typing import Any

from services.engine.decision_requests import _decision_json, listed_json, own_view_json
from shared.contracts import dump_json
from shared.games import api
from shared.views import view_documents


def _states(game: api.AnyGame, players: int, count: int) -> list[tuple[Any, int]]:
    """``count`` (state, pending seat) pairs drawn from random games."""
    found: list[tuple[dict[str, Any], int]] = []
    for seed in range(6):
        state, _ = game.new_game(game.rules(game.default_ruleset), players, seed)
        rng = random.Random(seed)
        while decisions := game.pending(state):
            d = rng.choice(decisions)
            found.append((game.snapshot(state), d.seat))
            game.decide_into(state, rng.choice(game.legal_commands(state, d.seat)))
    sample = random.Random(1).sample(found, min(count, len(found)))
    return [(game.restore(s), seat) for s, seat in sample]


def _cpu_us(states: list[tuple[Any, int]], work: Callable[[Any, int], object]) -> float:
    """The best of five passes' CPU time per state, in µs."""
    best = float("inf")
    for _ in range(5):
        started = time.process_time()
        for state, seat in states:
            work(state, seat)
        best = min(best, (time.process_time() - started) / len(states))
    return best * 1e6


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--states", type=int, default=600)
    parser.add_argument("--players", type=int, default=4)
    args = parser.parse_args()
    deadline = dump_json("2026-11-29T06:00:00+00:00")
    for name in ("age_of_discovery", "navegador"):
        game = api.get(name)
        states = _states(game, args.players, args.states)

        def request(state: Any, seat: int, game: api.AnyGame = game) -> None:
            for d in game.pending(state):
                if d.seat == seat:
                    listed = listed_json(game.legal_commands(state, seat))
                    _decision_json('"g-1"', 5, d, deadline, ",".join(listed))

        size = sum(len(own_view_json(game, s, seat)) for s, seat in states) / len(states)
        own = _cpu_us(states, lambda s, seat, g=game: own_view_json(g, s, seat))
        asked = _cpu_us(states, request)
        projected = _cpu_us(states, lambda s, _, g=game: view_documents(g, s, args.players))
        print(
            f"{name}: own view {own:.0f} µs ({size:.0f} bytes), the request {asked:.0f} µs, "
            f"view_documents {projected:.0f} µs, over {len(states)} states"
        )


if __name__ == "__main__":
    main()
