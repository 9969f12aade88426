"""The Age of Discovery: the pure rules core.

The one API every service uses::

    state, events = new_game(load_ruleset("standard"), {"tile_set": "extended"}, 4, seed=7)
    pending(state)                  # who must decide what now
    legal_commands(state, seat)     # every legal command for that seat
    events = decide(state, command) # events, or raises RuleViolation(code, reason)
    state = evolve(state, event)    # pure: no randomness, no clock
    view(state, seat)               # what that seat (None: a spectator) may see
    sample_state(rules, view, seed) # a whole state consistent with a seat's view (bots)
    score(state)                    # the breakdown per seat

No I/O, no clock, no global state. Chance is drawn in ``decide`` from a generator kept in
the state and recorded in events (server-only part), so replaying a log needs no generator.
"""

from __future__ import annotations

from collections.abc import Iterable

from ..commands import Command
from ..protocol import Decision, Event, RulesetError, RuleViolation
from ..registry import register
from .commands import (
    Battle,
    Bid,
    BuyBuilding,
    Casualties,
    Expedition,
    Land,
    Migrate,
    MoveSoldier,
    Pass,
    Place,
    TakeGood,
    TakeSpecialist,
    UseUniversity,
    War,
    command_from_dict,
)
from .engine import decide, decide_into, legal_commands, new_game, pending
from .evolve import apply, evolve
from .game import AgeOfDiscovery
from .ruleset import (
    Rules,
    Ruleset,
    available_rulesets,
    compile_rules,
    load_ruleset,
    parse_ruleset,
)
from .sampling import Sampler, sample_state
from .scoring import score
from .state import GameState, blank_state
from .views import determinize, policy_view, private_view, public_view, view

GAME = register(AgeOfDiscovery(), GameState)


def replay(rules: Rules | Ruleset, events: Iterable[Event]) -> GameState:
    """Rebuild a state from its whole log (the first event is ``game_created``)."""
    it = iter(events)
    first = next(it)
    if isinstance(rules, Ruleset):
        rules = compile_rules(rules, first.data["options"])
    s = blank_state(rules, len(first.data["players"]))
    apply(s, first)
    for event in it:
        apply(s, event)
    return s


__all__ = [
    "GAME",
    "AgeOfDiscovery",
    "Battle",
    "Bid",
    "BuyBuilding",
    "Casualties",
    "Command",
    "Decision",
    "Event",
    "Expedition",
    "GameState",
    "Land",
    "Migrate",
    "MoveSoldier",
    "Pass",
    "Place",
    "RuleViolation",
    "Rules",
    "Ruleset",
    "RulesetError",
    "Sampler",
    "TakeGood",
    "TakeSpecialist",
    "UseUniversity",
    "War",
    "apply",
    "available_rulesets",
    "command_from_dict",
    "compile_rules",
    "decide",
    "decide_into",
    "determinize",
    "evolve",
    "legal_commands",
    "load_ruleset",
    "new_game",
    "parse_ruleset",
    "pending",
    "policy_view",
    "private_view",
    "public_view",
    "replay",
    "sample_state",
    "score",
    "view",
]
