"""Benchmark: an HTTP move's two answers as the lobby makes them, without I/O (issue 24,
branch ``lobby7``).

    PYTHONPATH=<tree> python benchmarks/lobby_answers.py [--game age_of_discovery] [--moves 20000]

A game played 40 versions by its first legal command; for each version the game's meta
reply as the engine's append keeps it (the pending decision requests, written by the
engine's own ``_decision_json``), then per move: the ``POST /commands?legal=true`` answer
(``games.answer`` with the pending decisions parsed from a fresh copy of the reply) and the
other seat's ``GET /legal`` at that version (parsed again from another copy), each encoded
as the route sends it. Prints the CPU (``process_time``) per move; run it with another tree
on ``PYTHONPATH`` for its figures.
"""

from __future__ import annotations

import argparse
import asyncio
import time

from services.engine.decision_requests import _decision_json, listing
from services.lobby import games
from shared.contracts import CommandEnvelope, CommandResult
from shared.eventstore import pending_of
from shared.games import api

DEADLINE = '"2026-01-01T00:00:00Z"'


def replies(name: str, versions: int = 40) -> list[tuple[int, bytes]]:
    """Per version, the seat that decides and the meta's pending requests as JSON."""
    game = api.get(name)
    state, _ = game.new_game(game.rules(game.default_ruleset), 2, 7)
    out = []
    for version in range(1, versions + 1):
        decisions = game.pending(state)
        requests = [
            _decision_json(
                '"g-1"', version, d, DEADLINE, listing(game.legal_commands(state, d.seat)).json
            )
            for d in decisions
        ]
        out.append((decisions[0].seat, f"[{','.join(requests)}]".encode()))
        first = game.legal_commands(state, decisions[0].seat)[0]
        game.decide_into(state, first, trusted=True)
    return out


async def moves(kept: list[tuple[int, bytes]], n: int) -> None:
    for i in range(n):
        seat, raw = kept[i % len(kept)]
        version = i % len(kept) + 1
        v = str(version).encode()
        mover = 1 - seat
        envelope = CommandEnvelope(
            command_id="c" * 32, game_id="g-1", seat=mover, type="place", payload={}
        )
        result = CommandResult(
            command_id="c" * 32, game_id="g-1", status="accepted", seat=mover, version=version
        )
        pending = pending_of([v, v, b"0", bytes(bytearray(raw))])  # a read of its own
        games._json(await games.answer(None, envelope, result, True, pending))  # type: ignore[arg-type]
        pending = pending_of([v, v, b"0", bytes(bytearray(raw))])
        games._json(await games._legal(None, "g-1", seat, version, pending))  # type: ignore[arg-type]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--game", default="age_of_discovery")
    parser.add_argument("--moves", type=int, default=20000)
    args = parser.parse_args()
    kept = replies(args.game)
    asyncio.run(moves(kept, 200))  # warm up
    started = time.process_time()
    asyncio.run(moves(kept, args.moves))
    cpu = time.process_time() - started
    print(f"{args.game}: {1e6 * cpu / args.moves:.1f} µs of CPU a move (its two answers)")


if __name__ == "__main__":
    main()
