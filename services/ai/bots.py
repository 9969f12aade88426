"""Bots that decide from a seat's observation alone: ``random``, ``greedy`` and ``mcts``.

A bot sees exactly what its seat may see: the seat's view (``view(state, seat)``, which
carries its legal commands). It never receives the game state, so it cannot peek at
face-down tokens or pile orders. It answers with one of the legal commands.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import Any, Protocol

from shared.games.age_of_discovery.greedy import greedy_values
from shared.settings import Settings

from .mcts import Search

Observation = dict[str, Any]
Command = dict[str, Any]


class Bot(Protocol):
    """One interface for every level, so the arena and the service treat them alike."""

    level: str

    def choose(
        self, observation: Observation, rng: random.Random, budget_s: float | None = None
    ) -> Command:
        """One of ``observation["legal_commands"]``, found within ``budget_s`` seconds of
        thinking (``None``: the level's own default; instant levels ignore it)."""
        ...


class RandomBot:
    """A uniformly random legal command."""

    level = "random"

    def choose(
        self, observation: Observation, rng: random.Random, budget_s: float | None = None
    ) -> Command:
        return dict(rng.choice(observation["legal_commands"]))


class GreedyBot:
    """A hand-written heuristic: income, colony majorities, age scoring, building values.

    Every legal command gets a value from what the seat can see; the best one is played
    (ties broken at random). It looks one decision ahead, no further.
    """

    level = "greedy"

    def choose(
        self, observation: Observation, rng: random.Random, budget_s: float | None = None
    ) -> Command:
        legal = observation["legal_commands"]
        values = greedy_values(observation, rng)
        return dict(legal[max(range(len(legal)), key=values.__getitem__)])


class MctsBot:
    """Information-set Monte-Carlo tree search (:mod:`.mcts`) within a time budget.

    ``budget_s`` defaults to the ``bot_think_ms`` setting; ``max_iterations`` caps the search
    as well, which makes it reproducible for a seeded ``rng`` (tests).
    """

    level = "mcts"

    def __init__(self, budget_s: float | None = None, max_iterations: int | None = None) -> None:
        self.budget_s = Settings().bot_think_ms / 1000 if budget_s is None else budget_s
        self.max_iterations = max_iterations

    def choose(
        self, observation: Observation, rng: random.Random, budget_s: float | None = None
    ) -> Command:
        stop = time.perf_counter() + (self.budget_s if budget_s is None else budget_s)
        search = Search(observation, random.Random(rng.getrandbits(64)), greedy_values)
        return search.run(stop, self.max_iterations).to_dict()


BOTS: dict[str, Callable[[], Bot]] = {"random": RandomBot, "greedy": GreedyBot, "mcts": MctsBot}


def bot(level: str) -> Bot:
    """The bot for a level name; raises ``KeyError`` naming the known levels."""
    try:
        return BOTS[level]()
    except KeyError:
        raise KeyError(f"unknown bot level {level!r}; known: {', '.join(BOTS)}") from None
