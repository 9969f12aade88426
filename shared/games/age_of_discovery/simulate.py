"""Complete games between random legal players, in process: for the CLI, tests and benchmarks."""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from ..api import Event
from .engine import decide_into, legal_commands, new_game, pending
from .ruleset import Rules
from .scoring import score
from .state import GameState


@dataclass
class PlayedGame:
    """One finished game: its final state, whole log and how many decisions it took."""

    state: GameState
    events: list[Event] = field(default_factory=list)
    decisions: int = 0

    @property
    def scores(self) -> list[dict[str, Any]]:
        return score(self.state)


def play_random_game(rules: Rules, players: int, seed: int, keep_log: bool = True) -> PlayedGame:
    """Play one game to the end, every seat choosing uniformly among its legal commands."""
    chooser = random.Random(seed)
    state, events = new_game(rules, None, players, seed)
    game = PlayedGame(state, events if keep_log else [])
    while decisions := pending(state):
        seat = chooser.choice(decisions).seat
        command = chooser.choice(legal_commands(state, seat))
        new_events = decide_into(state, command)
        if keep_log:
            game.events += new_events
        game.decisions += 1
    return game
