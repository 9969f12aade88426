"""Benchmark: how well Navegador's ``evaluate`` predicts each seat's final total.

    python benchmarks/navegador_evaluate.py [--games 400] [--fit]

Plays ``--games`` seeded games of greedy seats (2 to 5 of them by turns, every other game
with one move in 20 random, so the positions vary) as the ``mcts`` bot's playouts do, keeps
every seat's position at the start of every ninth decision that begins a turn, and compares
with the final totals. The search compares seats, so each prediction and each final total
is measured from its table's mean: prints the mean squared error of the score now and of
``evaluate`` (lower is better; predicting no difference at all is the baseline).
``--fit`` also prints the least-squares weights of :data:`evaluation.ASSETS` (times the
share of the game left) for the final total less the score now (money aside): how
:data:`evaluation.WEIGHTS` were chosen (rounded). A benchmark, not a test.
"""

from __future__ import annotations

import argparse
import json
import random
from collections.abc import Callable
from typing import Any

from shared.games import api
from shared.games.navegador import evaluation
from shared.games.navegador.scoring import score

GAME = api.get("navegador")
RULES = GAME.rules("standard")
KEEP_EVERY = 9


def positions(seed: int) -> list[dict[str, Any]]:
    """One greedy game's kept positions: per seat its score now (money aside), evaluation,
    assets and share of the game left, and its final total."""
    policy = GAME.state_policy()
    state, _ = GAME.new_game(RULES, 2 + seed % 4, seed)
    rnd = random.Random(seed)
    chance = 0.05 if seed % 2 else 0.0
    kept, made = [], 0
    while decisions := GAME.pending(state):
        seat = decisions[0].seat
        legal = GAME.legal_commands(state, seat)
        made += 1
        if made % KEEP_EVERY == 0 and state.stage == "turn":
            rows, left = score(state), evaluation.game_left(state)
            values = GAME.evaluate(state)
            kept.append(
                [
                    {
                        "now": row["total"] - row["money"],
                        "score": row["total"],
                        "evaluate": values[p],
                        "features": [left * a for a in evaluation.assets(state, p)],
                    }
                    for p, row in enumerate(rows)
                ]
            )
        if len(legal) > 1 and rnd.random() >= chance:
            values = policy(state, seat, legal, rnd)
            command = legal[max(range(len(values)), key=values.__getitem__)]
        else:
            command = rnd.choice(legal)
        GAME.decide_into(state, command)
    finals = [row["total"] for row in score(state)]
    for table in kept:
        for p, seat in enumerate(table):
            seat["final"] = finals[p]
    return [dict(seat, seed=seed, table=t) for t, table in enumerate(kept) for seat in table]


def centred(rows: list[dict[str, Any]], value: Callable[[dict[str, Any]], float]) -> list[float]:
    """Each row's ``value`` less its table's mean."""
    tables: dict[tuple[int, int], list[float]] = {}
    for r in rows:
        tables.setdefault((r["seed"], r["table"]), []).append(value(r))
    means = {key: sum(t) / len(t) for key, t in tables.items()}
    return [value(r) - means[(r["seed"], r["table"])] for r in rows]


def error(rows: list[dict[str, Any]], key: str | None) -> float:
    """Mean squared error of ``key`` (None: of predicting no difference) as a prediction
    of the final total, both from their table's mean."""
    finals = centred(rows, lambda r: r["final"])
    guesses = centred(rows, lambda r: r[key]) if key else [0.0] * len(rows)
    return sum((f - g) ** 2 for f, g in zip(finals, guesses, strict=True)) / len(rows)


def fit(rows: list[dict[str, Any]]) -> list[float]:
    """Least squares of the final total less the score now (both from their table's mean)
    on the features (likewise): the normal equations, solved by elimination."""
    width = len(evaluation.ASSETS)
    columns = [centred(rows, lambda r, i=i: r["features"][i]) for i in range(width)]
    gained = centred(rows, lambda r: r["final"] - r["now"])
    m = [
        [sum(a * b for a, b in zip(columns[i], columns[j], strict=True)) for j in range(width)]
        + [sum(a * t for a, t in zip(columns[i], gained, strict=True))]
        for i in range(width)
    ]
    for c in range(width):
        pivot = max(range(c, width), key=lambda r: abs(m[r][c]))
        m[c], m[pivot] = m[pivot], m[c]
        for r in range(width):
            if r != c:
                f = m[r][c] / m[c][c]
                m[r] = [a - f * b for a, b in zip(m[r], m[c], strict=True)]
    return [m[i][width] / m[i][i] for i in range(width)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--games", type=int, default=400)
    parser.add_argument("--fit", action="store_true")
    args = parser.parse_args()
    rows = [row for seed in range(args.games) for row in positions(1000 + seed)]
    result: dict[str, Any] = {
        "positions": len(rows),
        "mse_no_difference": round(error(rows, None), 1),
        "mse_score_now": round(error(rows, "score"), 1),
        "mse_evaluate": round(error(rows, "evaluate"), 1),
    }
    if args.fit:
        weights = fit(rows)
        result["fitted"] = dict(zip(evaluation.ASSETS, (round(w, 3) for w in weights), strict=True))
    print(json.dumps(result))


if __name__ == "__main__":
    main()
