"""The registry of games: every game package registers its game here, and services find
games by name (:func:`get`, :func:`names`) or by state (:func:`of`).

A game is one package under ``shared/games/`` whose ``__init__`` calls :func:`register`; the
registry imports every such package the first time it is asked, so a new game needs nothing
but its package.
"""

from __future__ import annotations

import importlib
import pkgutil

from .events import upcasters
from .protocol import DEFAULT_GAME, AnyGame, UnknownGame

_GAMES: dict[str, AnyGame] = {}
_STATE_TYPES: dict[type, AnyGame] = {}
_discovered = False


def register(game: AnyGame, state_type: type) -> AnyGame:
    """Make ``game`` known under its name; ``state_type`` lets :func:`of` find it. Refuses
    a game whose :class:`~.protocol.GameInfo` says it has a greedy policy it lacks, or the
    reverse: what the catalog lists must be there. Refuses an event type at a version
    without every upcasting step to it, so an old log cannot fail to read later."""
    if (game.policy() is not None) != game.info.greedy_policy:
        raise ValueError(f"{game.name}: info.greedy_policy does not match its policy()")
    for cls in game.event_types().values():
        upcasters(cls)
    _GAMES[game.name] = game
    _STATE_TYPES[state_type] = game
    return game


def _discover() -> None:
    """Import every game package under ``shared/games`` once: each registers itself."""
    global _discovered
    if _discovered:
        return
    _discovered = True
    package = importlib.import_module("shared.games")
    for module in pkgutil.iter_modules(package.__path__):
        if module.ispkg:
            importlib.import_module(f"shared.games.{module.name}")


def names() -> list[str]:
    """The registered games' names, sorted."""
    _discover()
    return sorted(_GAMES)


def get(name: str | None = None) -> AnyGame:
    """The game called ``name`` (``None``: the default game); :class:`UnknownGame` else."""
    _discover()
    game = _GAMES.get(DEFAULT_GAME if name is None else name)
    if game is None:
        raise UnknownGame(name, sorted(_GAMES))
    return game


def of(state: object) -> AnyGame:
    """The game a state belongs to."""
    _discover()
    return _STATE_TYPES[type(state)]
