"""Random play: complete games between random legal players, in process, for any registered
game. The CLI's ``simulate``, tests and benchmarks drive a game through its protocol alone."""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from .protocol import AnyGame, Event


@dataclass
class PlayedGame:
    """One finished game: its final state, whole log and how many decisions it took."""

    state: Any
    events: list[Event] = field(default_factory=list)
    decisions: int = 0


def play_random_game(
    game: AnyGame, rules: Any, players: int, seed: int, keep_log: bool = True
) -> PlayedGame:
    """Play one game to the end, every seat choosing uniformly among its legal commands.

    The same seed plays the same game: the chooser is seeded with it, like the deal."""
    chooser = random.Random(seed)
    state, events = game.new_game(rules, players, seed)
    played = PlayedGame(state, events if keep_log else [])
    # Bound once: this loop is the benchmark of the rules core.
    pending, legal_commands, decide_into = game.pending, game.legal_commands, game.decide_into
    choice = chooser.choice
    while decisions := pending(state):
        command = choice(legal_commands(state, choice(decisions).seat))
        new_events = decide_into(state, command, trusted=True)  # drawn from the legal list
        if keep_log:
            played.events += new_events
        played.decisions += 1
    return played
