"""The door services go through to games: the protocol, the registry, the catalog and
random play, re-exported from the modules that hold them (:mod:`.protocol`, :mod:`.commands`,
:mod:`.registry`, :mod:`.catalog`, :mod:`.play`), and :mod:`.analytics` (what analytics asks of
any game). Services import this module, never a game package or another module of
``shared.games``; game packages import the modules themselves."""

from __future__ import annotations

from . import analytics
from .catalog import POLICY_VIEW, CatalogEntry, bot_levels, catalog, reads_policy_view
from .commands import Command, command_schema, command_wire_schema, parse_command
from .events import EventData, check_event, event_schema
from .play import PlayedGame, play_random_game
from .protocol import (
    DEFAULT_GAME,
    GAME_CREATED,
    GAME_ENDED,
    PUBLIC,
    AnyGame,
    Decision,
    Event,
    Fact,
    Game,
    GameInfo,
    Observation,
    Policy,
    RulesetError,
    RuleViolation,
    Sampler,
    SearchHints,
    SeatResult,
    StatePolicy,
    UnknownGame,
    Visibility,
    merge_views,
)
from .registry import get, names, of, register

__all__ = [
    "DEFAULT_GAME",
    "GAME_CREATED",
    "GAME_ENDED",
    "POLICY_VIEW",
    "PUBLIC",
    "AnyGame",
    "CatalogEntry",
    "Command",
    "Decision",
    "Event",
    "EventData",
    "Fact",
    "Game",
    "GameInfo",
    "Observation",
    "PlayedGame",
    "Policy",
    "RuleViolation",
    "RulesetError",
    "Sampler",
    "SearchHints",
    "SeatResult",
    "StatePolicy",
    "UnknownGame",
    "Visibility",
    "analytics",
    "bot_levels",
    "catalog",
    "check_event",
    "command_schema",
    "command_wire_schema",
    "event_schema",
    "get",
    "merge_views",
    "names",
    "of",
    "parse_command",
    "play_random_game",
    "reads_policy_view",
    "register",
]
