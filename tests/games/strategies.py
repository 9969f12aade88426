"""Games drawn for the protocol suite, and a seeded random player to play them.

Everything here reaches a game through the registry and the Game protocol alone
(``api.get(name)``), so every property of ``tests/games`` holds a game to account as soon
as it registers. A drawn :class:`Spec` names the game, its ruleset, edition options drawn
from the choices its options schema offers, a player count in its range and two seeds: one
deals the game, one drives the random player. Every test body is deterministic given its
drawn arguments, so a failing example hypothesis prints replays exactly
(``Spec(...).start().finish()`` replays the plain game).
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import cache
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from shared.games import api
from shared.games.api import AnyGame, Command, Event

from . import schemas

MAX_DECISIONS = 5_000
"""Random play must end a game within this many decisions."""

PROPERTY_SETTINGS: dict[str, Any] = {
    "deadline": None,
    "suppress_health_check": [HealthCheck.too_slow, HealthCheck.data_too_large],
    # No "explain" phase: it replays many whole games after a failure, for little insight.
    "phases": [Phase.explicit, Phase.reuse, Phase.generate, Phase.target, Phase.shrink],
}

SEEDS = st.integers(0, 2**32 - 1)


@cache
def random_game_length(name: str) -> float:
    """Decisions in a random game of ``name`` (four seeded games at its most players)."""
    game = api.get(name)
    rules = game.rules(game.default_ruleset)
    played = [api.play_random_game(game, rules, game.max_players, seed, False) for seed in range(4)]
    return sum(p.decisions for p in played) / len(played)


def examples(name: str, n: int) -> int:
    """How many games a property plays for ``name``: ``n`` for the registered game whose
    random games are shortest, proportionally fewer (at least 3) for a game whose random
    games are longer, so every game's suite costs about the same time. A long game's
    example walks that many more decisions, so it checks about as many situations."""
    shortest = min(random_game_length(other) for other in api.names())
    return max(3, math.ceil(n * shortest / random_game_length(name)))


def per_game_property(n: int, **strategies: st.SearchStrategy[Any]) -> Callable[..., Any]:
    """``@given(**strategies)`` for every registered game (a test parametrised by ``name``),
    with :func:`examples` (``name``, ``n``) examples each: pytest's parameter and hypothesis'
    settings cannot otherwise differ per game."""

    def wrap(test: Callable[..., None]) -> Callable[[str], None]:
        def run(name: str) -> None:
            def example(**drawn: Any) -> None:
                test(name, **drawn)

            scaled = settings(max_examples=examples(name, n), **PROPERTY_SETTINGS)
            scaled(given(**strategies)(example))()

        run.__name__, run.__doc__, run.__module__ = test.__name__, test.__doc__, test.__module__
        return pytest.mark.parametrize("name", api.names())(run)

    return wrap


def option_choices(game: AnyGame, ruleset: str) -> st.SearchStrategy[dict[str, Any]]:
    """Edition options drawn from the choices the options model's JSON schema offers; an
    option with no finite choices keeps its default."""
    schema = game.options_model(ruleset).model_json_schema()
    drawn = {
        key: strategy
        for key, prop in schema.get("properties", {}).items()
        if (strategy := schemas.choices(prop, schema)) is not None
    }
    return st.fixed_dictionaries(drawn)


@dataclass(frozen=True)
class Spec:
    """One drawn game."""

    name: str
    ruleset: str
    options: tuple[tuple[str, Any], ...]
    players: int
    seed: int
    play_seed: int

    @property
    def game(self) -> AnyGame:
        return api.get(self.name)

    def start(self) -> Play:
        """The dealt game, ready for the random player."""
        game = self.game
        rules = game.rules(self.ruleset, dict(self.options))
        state, log = game.new_game(rules, self.players, self.seed)
        return Play(game, state, list(log), random.Random(self.play_seed), self.players)


def specs(name: str) -> st.SearchStrategy[Spec]:
    """Games of the registered game ``name``: any ruleset it ships, options, players."""
    return _specs(name)


@st.composite
def _specs(draw: st.DrawFn, name: str) -> Spec:
    """A composite rather than ``builds``, so that hypothesis reports a failing example as
    the ``Spec(...)`` that replays it."""
    game = api.get(name)
    ruleset = draw(st.sampled_from(game.rulesets()))
    options = draw(option_choices(game, ruleset))
    return Spec(
        name=name,
        ruleset=ruleset,
        options=tuple(sorted(options.items())),
        players=draw(st.integers(game.min_players, game.max_players)),
        seed=draw(SEEDS),
        play_seed=draw(SEEDS),
    )


class Play:
    """A game played by a seeded random player: the live state, its whole log, and the
    generator that picks the seat (among those pending) and the command."""

    def __init__(
        self, game: AnyGame, state: Any, log: list[Event], rnd: random.Random, players: int
    ) -> None:
        self.game = game
        self.state = state
        self.log = log
        self.rnd = rnd
        self.players = players
        self.decisions = 0

    @property
    def seats(self) -> range:
        return range(self.players)

    def choices(self) -> Iterator[tuple[int, list[Command], Command]]:
        """Yield (seat, its legal commands, the one chosen) before each decision until the
        game is over; the caller applies the chosen command (:meth:`apply`) before asking
        for the next. A pending seat always has a legal command, and games end."""
        offered = 0
        while decisions := self.game.pending(self.state):
            offered += 1
            assert offered <= MAX_DECISIONS, f"no end after {MAX_DECISIONS} decisions"
            seat = self.rnd.choice(decisions).seat
            legal = self.game.legal_commands(self.state, seat)
            assert legal, f"seat {seat} must decide {decisions} but has no legal command"
            yield seat, legal, self.rnd.choice(legal)

    def apply(self, command: Command) -> list[Event]:
        """Play ``command`` on the live state (the engine's fast path) and log its events."""
        events = self.game.decide_into(self.state, command)
        self.log += events
        self.decisions += 1
        return events

    def finish(self) -> Play:
        """Play on at random to the end."""
        for _, _, command in self.choices():
            self.apply(command)
        return self

    def state_hash(self) -> str:
        return self.game.state_hash(self.state)
