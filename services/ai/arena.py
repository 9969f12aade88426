"""``caravel arena``: bots against each other, in process, seats rotated across games, for
any registered game."""

from __future__ import annotations

import random
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from services.usage import percentile
from shared.games import api
from shared.games.api import AnyGame, SeatResult
from shared.intervals import wilson

from .bots import Bot, bot


@dataclass
class LevelStats:
    games: int = 0
    wins: float = 0.0  # a shared first place splits the win
    scores: list[int] = field(default_factory=list)
    latencies: list[float] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        rate = self.wins / self.games if self.games else 0.0
        ordered = sorted(self.latencies)
        return {
            "seats_played": self.games,
            "win_rate": round(rate, 4),
            "ci95": [round(x, 4) for x in wilson(self.wins, self.games)],
            "mean_score": round(sum(self.scores) / len(self.scores), 2) if self.scores else 0.0,
            "latency_ms": {
                "p50": round(1000 * percentile(ordered, 0.5), 3),
                "p95": round(1000 * percentile(ordered, 0.95), 3),
            },
        }


def play(
    game: AnyGame,
    rules: Any,
    bots: Sequence[Bot],
    seed: int,
    stats: dict[str, LevelStats],
    budget_s: float | None = None,
) -> list[SeatResult]:
    """One game; ``bots[seat]`` plays ``seat`` from its observation only, thinking up to
    ``budget_s`` per decision (``None``: each level's default)."""
    state, _ = game.new_game(rules, len(bots), seed)
    rng = random.Random(seed)
    while decisions := game.pending(state):
        decision = decisions[0]
        observation = game.view(state, decision.seat)
        started = time.perf_counter()
        choice = bots[decision.seat].choose(observation, rng, budget_s)
        stats[bots[decision.seat].level].latencies.append(time.perf_counter() - started)
        game.decide_into(state, game.parse_command(choice))
    return game.results(state)


def arena(
    levels: Sequence[str],
    games: int,
    seed: int,
    *,
    game: str | None = None,
    options: dict[str, Any] | None = None,
    ruleset: str | None = None,
    progress: Callable[[], None] | None = None,
    budget_s: float | None = None,
) -> dict[str, Any]:
    """Play ``games`` games of ``game`` (``None``: the default game) with its ``ruleset``
    (``None``: the game's default) and edition ``options``; game g seats the levels rotated
    by g, so no level keeps a seat."""
    played = api.get(game)
    rules = played.rules(ruleset or played.default_ruleset, options)
    stats: dict[str, LevelStats] = defaultdict(LevelStats)
    started = time.perf_counter()
    for g in range(games):
        shift = g % len(levels)
        seated = list(levels[shift:]) + list(levels[:shift])
        bots = [bot(level) for level in seated]
        results = play(played, rules, bots, seed + g, stats, budget_s)
        winners = [r.seat for r in results if r.place == 1]
        for r in results:
            level = seated[r.seat]
            stats[level].games += 1
            stats[level].scores.append(r.total)
            if r.seat in winners:
                stats[level].wins += 1 / len(winners)
        if progress:
            progress()
    return {
        "game": played.name,
        "games": games,
        "seats": list(levels),
        "seconds": round(time.perf_counter() - started, 2),
        "levels": {level: stats[level].summary() for level in dict.fromkeys(levels)},
    }
