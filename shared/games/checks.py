"""What every game checks the same way before its own rules: that a command is one and
names a seat of a game still running, and that a new game has a number of players its
ruleset takes. Each refusal is a :class:`~.protocol.RuleViolation` a player can read."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .commands import Command
from .protocol import RuleViolation


def command_seat(command: Any, over: bool, n: int) -> int:
    """The seat ``command`` names, once it is a command for one of the ``n`` seats of a game
    that is not ``over``."""
    if not isinstance(command, Command):
        raise RuleViolation("malformed", "not a command")
    if over:
        raise RuleViolation("game_over", "the game is over")
    seat = command.seat
    if type(seat) is not int or not 0 <= seat < n:
        named = "the command names no seat" if seat is None else f"there is no seat {seat!r}"
        raise RuleViolation("unknown_seat", f"{named}: this game has seats 0 to {n - 1}")
    return seat


def seat_names(players: Sequence[str] | int, ruleset: Any) -> list[str]:
    """The players' names (``seat 0``... for a count), once ``ruleset`` (with ``title``,
    ``min_players`` and ``max_players``) takes that many."""
    names = [f"seat {i}" for i in range(players)] if isinstance(players, int) else list(players)
    low, high = ruleset.min_players, ruleset.max_players
    if not low <= len(names) <= high:
        raise RuleViolation("bad_player_count", f"{ruleset.title} takes {low} to {high} players")
    return names
