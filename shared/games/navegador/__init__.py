"""Navegador: the pure rules core, registered with the game registry.

    state, events = new_game(compile_rules(load_ruleset("standard")), 4, seed=7)
    pending(state)                  # who must decide what now
    legal_commands(state, seat)     # every legal command for that seat
    events = decide(state, command) # events, or raises RuleViolation(code, reason)
    view(state, seat)               # what that seat (None: a spectator) may see
    score(state)                    # the breakdown per seat

No I/O, no clock, no global state. The only chance is the setup's (stacks, removed tokens,
the starting player), recorded in its event, so replaying a log needs no generator.
"""

from __future__ import annotations

from ..registry import register
from .engine import decide, decide_into, legal_commands, new_game, pending
from .game import Navegador
from .ruleset import Rules, compile_rules, load_ruleset
from .scoring import score
from .state import State
from .views import determinize, policy_view, view

GAME = register(Navegador(), State)

__all__ = [
    "GAME",
    "Navegador",
    "Rules",
    "State",
    "compile_rules",
    "decide",
    "decide_into",
    "determinize",
    "legal_commands",
    "load_ruleset",
    "new_game",
    "pending",
    "policy_view",
    "score",
    "view",
]
