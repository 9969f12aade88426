"""The Age of Discovery on the :class:`~shared.games.base.BaseGame`: its rules, seat
results, views and the bots' plug-ins (greedy policy, playout evaluation); the base game
supplies the rest of the protocol.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import cache
from typing import Any

from ..analytics import named_ids
from ..base import BaseGame
from ..protocol import Event, Fact, GameInfo, Policy, SeatResult, StatePolicy
from . import engine, views
from .commands import COMMAND_TYPES
from .events import EVENT_TYPES
from .evolve import handles
from .greedy import greedy_values, state_values
from .ruleset import FILES, Rules, compile_rules
from .sampling import Sampler
from .scoring import colony_vp, score
from .state import GameState, blank_state

NAME = "age_of_discovery"
MONEY_PER_VP = 4.0  # money left is worth something in a playout: buildings, tie-breaks
BREAKDOWN = ("colonies", "discoveries", "buildings", "economy")


class AgeOfDiscovery(BaseGame[GameState, Rules]):
    """The game, as the registry hands it to services."""

    files = FILES
    handlers = handles
    commands = COMMAND_TYPES
    events = EVENT_TYPES
    state_type = GameState
    sampler_type = Sampler
    view_model = f"{__package__}.view_model"
    compile = staticmethod(compile_rules)
    blank = staticmethod(blank_state)

    def __init__(self) -> None:
        standard = FILES.load("standard")
        super().__init__(
            GameInfo(
                name=NAME,
                title="The Age of Discovery",
                min_players=standard.min_players,
                max_players=standard.max_players,
                score_bounds=(0, 150),
                greedy_policy=True,
                state_policy=True,
                facts=True,
                board=NAME,
            )
        )

    def option_choices(self, ruleset: Any) -> Mapping[str, Sequence[str]]:
        choices: Mapping[str, Sequence[str]] = ruleset.options
        return choices

    # --- playing --------------------------------------------------------------------------

    def new_game(
        self, rules: Rules, players: Sequence[str] | int, seed: int
    ) -> tuple[GameState, list[Event]]:
        return self.record_versions(engine.new_game(rules, None, players, seed))

    # The calls of every step of a random game or a playout, bound straight to the engine's
    # functions: no adapter frame per call.
    pending = staticmethod(engine.pending)
    legal_commands = staticmethod(engine.legal_commands)
    decide = staticmethod(engine.decide)
    decide_into = staticmethod(engine.decide_into)
    determinize = staticmethod(views.determinize)

    def is_over(self, state: GameState) -> bool:
        return state.phase == "over"

    def results(self, state: GameState) -> list[SeatResult]:
        sides = [nation.name for nation in state.rules.ruleset.nations]
        return self.seat_results(score(state), BREAKDOWN, sides)

    # --- hidden information ---------------------------------------------------------------

    public_view = staticmethod(views.public_view)  # type: ignore[assignment]
    private_view = staticmethod(views.private_view)  # type: ignore[assignment]
    private_part = staticmethod(views.private_part)  # type: ignore[assignment]
    policy_view = staticmethod(views.policy_view)  # type: ignore[assignment]
    turn_positions = staticmethod(views.start_positions)  # type: ignore[assignment]

    # --- plug-ins -------------------------------------------------------------------------

    def evaluate(self, state: GameState) -> list[float]:
        """Score so far, plus the colony majorities held now counted for every age scoring
        still to come, plus money (it buys buildings and wins tie-breaks)."""
        rules = state.rules
        rows = score(state)
        to_come = 0
        if state.phase != "over":
            to_come = sum(1 for t in rules.ruleset.age_end_turns if t >= state.turn)
        colonies = [0.0] * state.n
        if to_come:
            for units in state.units:
                for seat, vp in enumerate(colony_vp(units, rules)):
                    colonies[seat] += vp * to_come
        return [
            row["total"] + colonies[seat] + state.money[seat] / MONEY_PER_VP
            for seat, row in enumerate(rows)
        ]

    def policy(self) -> Policy:
        return greedy_values

    def state_policy(self) -> StatePolicy:
        """The same policy read off a whole state: no view built per playout step."""
        return state_values

    def labels(self) -> dict[str, dict[str, str]]:
        """Readable names for the analytics: the ruleset's regions and buildings, the score
        columns, the facts and the edition options."""
        return _labels()

    def facts(self, state: GameState, event: Event) -> list[Fact]:
        """Buildings bought (with their price) and regions discovered."""
        data = event.data
        if event.type == "building_bought":
            return [Fact("building_bought", data["seat"], data["building"], data["price"])]
        if event.type == "free_discovery" or (event.type == "expedition" and data["success"]):
            return [Fact("discovery", data["seat"], data["region"] or "deck")]
        return []


@cache
def _labels() -> dict[str, dict[str, str]]:
    return {
        "subjects": {**named_ids(FILES.load("standard")), "deck": "Discovery deck"},
        "columns": {"economy": "Economy", "total": "Total"},
        "facts": {"building_bought": "Buildings bought", "discovery": "Regions discovered"},
        "options": {
            "navy_vp_per_ship": "Navy VP per ship",
            "factory_income": "Factory income",
            "tile_set": "Tile set",
            "university": "University",
            "starting_order": "Starting order",
        },
        "values": {"to_front": "To the front", "one_forward": "One step forward"},
    }
