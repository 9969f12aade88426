"""Bots that decide from a seat's observation alone: ``random``, ``greedy`` and ``mcts``.

A bot sees exactly what its seat may see: the seat's view (``game.view(state, seat)``, which
carries its legal commands and names its game). It never receives the game state, so it
cannot peek at face-down tokens or pile orders. It answers with one of the legal commands.

Bots know no game: each looks the observation's game up in the registry and plays it
through the protocol. ``random`` and ``mcts`` play any game; ``greedy`` plays the game's own
policy, so it plays only the games that have one (:func:`shared.games.api.bot_levels`).
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import Any, Protocol

from shared.games import api
from shared.games.api import AnyGame, Observation
from shared.settings import Settings

from .mcts import Search

Wire = dict[str, Any]
"""A command's wire form, as the observation lists it and the bus carries it."""


class Bot(Protocol):
    """One interface for every level, so the arena and the service treat them alike."""

    level: str
    # True: it thinks for a budget (run in a thread); False: it answers at once (a pure
    # Python pass the GIL would keep the loop waiting on in a thread anyway)
    searches: bool

    def choose(
        self, observation: Observation, rng: random.Random, budget_s: float | None = None
    ) -> Wire:
        """One of ``observation["legal_commands"]``, found within ``budget_s`` seconds of
        thinking (``None``: the level's own default; instant levels ignore it)."""
        ...


def game_of(observation: Observation) -> AnyGame:
    """The game an observation belongs to (views projected before games had names: the
    default game)."""
    return api.get(observation.get("game"))


class RandomBot:
    """A uniformly random legal command."""

    level = "random"
    searches = False

    def choose(
        self, observation: Observation, rng: random.Random, budget_s: float | None = None
    ) -> Wire:
        return dict(rng.choice(observation["legal_commands"]))


class GreedyBot:
    """The game's greedy policy: every legal command gets a value from what the seat can
    see, and the best one is played. It looks one decision ahead, no further."""

    level = "greedy"
    searches = False

    def choose(
        self, observation: Observation, rng: random.Random, budget_s: float | None = None
    ) -> Wire:
        game = game_of(observation)
        policy = game.policy()
        if policy is None:
            raise ValueError(f"{game.name} has no greedy policy; levels: {api.bot_levels(game)}")
        legal = observation["legal_commands"]
        values = policy(observation, rng)
        return dict(legal[max(range(len(legal)), key=values.__getitem__)])


class MctsBot:
    """Information-set Monte-Carlo tree search (:mod:`.mcts`) within a time budget.

    ``budget_s`` defaults to the ``bot_think_ms`` setting; ``max_iterations`` caps the search
    as well, which makes it reproducible for a seeded ``rng`` (tests, benchmarks).
    """

    level = "mcts"
    searches = True

    def __init__(self, budget_s: float | None = None, max_iterations: int | None = None) -> None:
        self.budget_s = Settings().bot_think_ms / 1000 if budget_s is None else budget_s
        self.max_iterations = max_iterations

    def choose(
        self, observation: Observation, rng: random.Random, budget_s: float | None = None
    ) -> Wire:
        stop = time.perf_counter() + (self.budget_s if budget_s is None else budget_s)
        search = Search(game_of(observation), observation, random.Random(rng.getrandbits(64)))
        return search.run(stop, self.max_iterations).to_dict()


BOTS: dict[str, Callable[[], Bot]] = {"random": RandomBot, "greedy": GreedyBot, "mcts": MctsBot}


def bot(level: str) -> Bot:
    """The bot for a level name; raises ``KeyError`` naming the known levels."""
    try:
        return BOTS[level]()
    except KeyError:
        raise KeyError(f"unknown bot level {level!r}; known: {', '.join(BOTS)}") from None
