"""The catalog of games, as clients discover them (``GET /games``, the CLI): each registered
game described from its protocol and its :class:`~.protocol.GameInfo`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .commands import command_schema
from .protocol import AnyGame
from .registry import get, names


def bot_levels(game: AnyGame) -> list[str]:
    """The bot levels that can play ``game``: ``random`` and ``mcts`` play any game through
    the protocol; ``greedy`` needs the game's policy."""
    return ["random", *(["greedy"] if game.info.greedy_policy else []), "mcts"]


POLICY_VIEW = "policy"
"""A decision request's ``view["part"]`` when the view is the part the greedy policy reads
(:meth:`Game.policy_view`), not the seat's whole view."""


def reads_policy_view(game: AnyGame, level: str | None) -> bool:
    """Whether a bot seat of ``level`` decides from the game's policy view alone: a greedy
    seat, and a leaver's seat (``None``: the fallback, which is greedy wherever the game has
    a policy)."""
    return game.info.greedy_policy and level in (None, "greedy")


@dataclass(frozen=True)
class CatalogEntry:
    """A game as clients discover it: players, rulesets, options, command and view shapes."""

    name: str
    title: str
    min_players: int
    max_players: int
    default_ruleset: str
    rulesets: list[str]
    options: dict[str, Any]
    bot_levels: list[str]
    commands: dict[str, Any] = field(default_factory=dict)
    view: dict[str, Any] = field(default_factory=dict)
    """The JSON schema of a seat's (or a spectator's) view of the game."""
    chance: bool = True
    hidden_information: bool = True
    board: str | None = None
    """The web client's board drawing for the game (None: the generic view)."""
    labels: dict[str, dict[str, str]] = field(default_factory=dict)
    """Readable names of the game's ids, by namespace (:meth:`~.protocol.Game.labels`)."""


def catalog() -> list[CatalogEntry]:
    """Every registered game, described from its protocol (``GET /games``, the CLI)."""
    out = []
    for name in names():
        game = get(name)
        out.append(
            CatalogEntry(
                name=game.name,
                title=game.title,
                min_players=game.min_players,
                max_players=game.max_players,
                default_ruleset=game.default_ruleset,
                rulesets=game.rulesets(),
                options=game.options_model(game.default_ruleset).model_json_schema(),
                bot_levels=bot_levels(game),
                commands={t: command_schema(c) for t, c in game.command_types().items()},
                view=game.view_schema(),
                chance=game.info.chance,
                hidden_information=game.info.hidden_information,
                board=game.info.board,
                labels=game.labels(),
            )
        )
    return out
