"""Whether two checkouts' greedy Navegador bots play the same games: seeded 4-seat greedy
games played as the balance lab plays them (``services/lab.py`` ``play``), one digest per
seed of every command chosen, every value and the results. A speed-up of the policy must
leave them all equal.

    python benchmarks/navegador_same_games.py --old /tmp/base --games 200

(``/tmp/base``: ``git archive main | tar -x -C /tmp/base``.) Each checkout plays in a
subprocess with its own ``PYTHONPATH``; prints the number of seeds compared and those that
differ (none: exit 0).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import subprocess
import sys
from pathlib import Path


def digests(first: int, count: int) -> list[str]:
    """The digest of each seeded game played by the checkout on ``sys.path``."""
    from shared.games import api

    game = api.get("navegador")
    rules = game.rules(game.default_ruleset, {})
    policy = game.state_policy()
    assert policy is not None
    found = []
    for seed in range(first, first + count):
        state, _ = game.new_game(rules, 4, seed)
        rng = random.Random(seed)
        h = hashlib.sha256()
        while pending := game.pending(state):
            seat = pending[0].seat
            legal = game.legal_commands(state, seat)
            values = policy(state, seat, legal, rng)
            command = legal[max(range(len(legal)), key=values.__getitem__)]
            h.update(repr((command, values)).encode())
            game.decide_into(state, command, trusted=True)
        h.update(repr(game.results(state)).encode())
        found.append(h.hexdigest())
    return found


def played_by(tree: Path, first: int, count: int) -> list[str]:
    """:func:`digests` in a subprocess running this script with ``tree`` on its path."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    argv = [sys.executable, __file__, "--play", "--seed", str(first), "--games", str(count)]
    out = subprocess.run(argv, env=env, check=True, capture_output=True, text=True)
    result: list[str] = json.loads(out.stdout)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--old", type=Path, help="the other checkout's root")
    parser.add_argument("--play", action="store_true", help="print this path's digests")
    parser.add_argument("--games", type=int, default=200)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    if args.play:
        print(json.dumps(digests(args.seed, args.games)))
        return
    if args.old is None:
        parser.error("--old is required")
    here = Path(__file__).resolve().parent.parent
    old = played_by(args.old, args.seed, args.games)
    new = played_by(here, args.seed, args.games)
    differ = [args.seed + i for i, (a, b) in enumerate(zip(old, new, strict=True)) if a != b]
    print(json.dumps({"games": args.games, "differ": differ}))
    sys.exit(1 if differ else 0)


if __name__ == "__main__":
    main()
