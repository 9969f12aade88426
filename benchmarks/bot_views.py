"""What a bot seat's request costs (issue 24): on the engine's side, the request itself (the
seat's legal commands listed, the request's JSON) and the view a seat of ``--level`` gets in
it (``bot_view_json``: a greedy seat the game's ``policy_view``, marked ``"part":
"policy"``, where the game has one, else the whole own view); on the bot's side, the request
parsed as the bot player reads it off its stream (``read_decision_request``) and the
decision from it; and the request's size with its view. Also ``own_view_json`` (any other
bot level's view) and the views projection's ``view_documents``. CPU time (``process_time``,
best of five passes) per request, over random states of ``--players``-seat games.

    python benchmarks/bot_views.py [--game navegador] [--states 600] [--players 4]

Run it with ``PYTHONPATH`` set to the tree to measure (this file runs against older trees
too: it uses only what they have). The states are copied as they are drawn: a game's
``snapshot`` returns its state's own lists, so snapshots kept while the game plays on
changed with it (before, a mix of states).
"""

from __future__ import annotations

import argparse
import json
import random
import time
from collections.abc import Callable
from typing import Any

from services.ai.bots import bot
from services.engine.decision_requests import _decision_json, bot_view_json, listing, own_view_json
from shared.contracts import dump_json
from shared.contracts.envelopes import read_decision_request
from shared.games import api
from shared.views import view_documents

DEADLINE = dump_json("2026-11-29T06:00:00+00:00")


def _states(game: api.AnyGame, players: int, count: int) -> list[tuple[Any, int]]:
    """``count`` (state, pending seat) pairs drawn from random games, each state a copy."""
    found: list[tuple[str, int]] = []
    for seed in range(6):
        state, _ = game.new_game(game.rules(game.default_ruleset), players, seed)
        rng = random.Random(seed)
        while decisions := game.pending(state):
            d = rng.choice(decisions)
            found.append((json.dumps(game.snapshot(state)), d.seat))
            game.decide_into(state, rng.choice(game.legal_commands(state, d.seat)))
    sample = random.Random(1).sample(found, min(count, len(found)))
    return [(game.restore(json.loads(s)), seat) for s, seat in sample]


def _cpu_us(items: list[Any], work: Callable[..., object]) -> float:
    """The best of five passes' CPU time per item, in µs."""
    best = float("inf")
    for _ in range(5):
        started = time.process_time()
        for item in items:
            work(*item)
        best = min(best, (time.process_time() - started) / len(items))
    return best * 1e6


def _request(game: api.AnyGame, state: Any, seat: int) -> str:
    """The seat's decision request as the engine writes it, without a view."""
    d = next(d for d in game.pending(state) if d.seat == seat)
    return _decision_json('"g-1"', 5, d, DEADLINE, listing(game.legal_commands(state, seat)).json)


def _with_view(request: str, view: str) -> str:
    """The request as the bot player's stream holds it: the view set in as its last field
    (as the append script does)."""
    return f'{request[:-1]},"view":{view}}}'


def measure(name: str, states_wanted: int, players: int, level: str) -> dict[str, Any]:
    game = api.get(name)
    states = _states(game, players, states_wanted)
    player = bot(level)

    def engine_side(state: Any, seat: int) -> None:
        _request(game, state, seat)
        bot_view_json(game, state, seat, level, None)

    raws = [
        (_with_view(_request(game, s, seat), bot_view_json(game, s, seat, level, None)[0]),)
        for s, seat in states
    ]

    def decide(raw: str) -> None:
        request = read_decision_request(raw)
        assert request.view is not None
        own = {**request.view, "legal_commands": request.legal_commands, "version": 5}
        player.choose(own, random.Random(1))

    return {
        "game": name,
        "level": level,
        "states": len(states),
        "engine_request_us": _cpu_us(states, lambda s, seat: _request(game, s, seat)),
        "engine_bot_view_us": _cpu_us(
            states, lambda s, seat: bot_view_json(game, s, seat, level, None)
        ),
        "engine_side_us": _cpu_us(states, engine_side),
        "bot_parse_us": _cpu_us(raws, read_decision_request),
        "bot_parse_and_decide_us": _cpu_us(raws, decide),
        "request_bytes": sum(len(raw.encode()) for (raw,) in raws) / len(raws),
        "own_view_us": _cpu_us(states, lambda s, seat: own_view_json(game, s, seat)),
        "view_documents_us": _cpu_us(states, lambda s, _: view_documents(game, s, players)),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--game", action="append", help="a game (again for more; default all)")
    parser.add_argument("--states", type=int, default=600)
    parser.add_argument("--players", type=int, default=4)
    parser.add_argument("--level", default="greedy", help="the bot level whose view is sent")
    parser.add_argument("--json", action="store_true", help="one JSON object per game")
    args = parser.parse_args()
    for name in args.game or api.names():
        m = measure(name, args.states, args.players, args.level)
        if args.json:
            print(json.dumps(m))
            continue
        print(
            f"{name} ({args.level} seat, {m['states']} states): engine's side "
            f"{m['engine_side_us']:.0f} µs (request {m['engine_request_us']:.0f}, bot view "
            f"{m['engine_bot_view_us']:.0f}), bot's parse {m['bot_parse_us']:.0f} µs "
            f"(with the decision {m['bot_parse_and_decide_us']:.0f}), request "
            f"{m['request_bytes']:.0f} bytes; own view {m['own_view_us']:.0f} µs, "
            f"view_documents {m['view_documents_us']:.0f} µs"
        )


if __name__ == "__main__":
    main()
