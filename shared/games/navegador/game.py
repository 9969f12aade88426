"""Navegador on the :class:`~shared.games.base.BaseGame`: its rules, seat results, views and
the bots' plug-ins; the base game supplies the rest of the protocol.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache

from ..analytics import named_ids
from ..base import BaseGame
from ..protocol import (
    Event,
    Fact,
    GameInfo,
    Policy,
    SearchHints,
    SeatResult,
    StatePolicy,
)
from . import engine, views
from .commands import COMMAND_TYPES
from .evaluation import SEARCH_HINTS, expected_totals
from .events import EVENT_TYPES
from .evolve import handles
from .greedy import greedy_values, state_values
from .ruleset import COLUMNS, FILES, Rules, compile_rules
from .sampling import Sampler
from .scoring import BREAKDOWN, score
from .state import State, blank_state


class Navegador(BaseGame[State, Rules]):
    """The game, as the registry hands it to services."""

    files = FILES
    handlers = handles
    commands = COMMAND_TYPES
    events = EVENT_TYPES
    state_type = State
    sampler_type = Sampler
    view_model = f"{__package__}.view_model"
    compile = staticmethod(compile_rules)
    blank = staticmethod(blank_state)

    def __init__(self) -> None:
        standard = FILES.load("standard")
        super().__init__(
            GameInfo(
                name=engine.NAME,
                title="Navegador",
                min_players=standard.min_players,
                max_players=standard.max_players,
                score_bounds=(0, 200),
                greedy_policy=True,
                state_policy=True,
                search_hints=True,
                facts=True,
                board=engine.NAME,
            )
        )

    # --- playing --------------------------------------------------------------------------

    def new_game(
        self, rules: Rules, players: Sequence[str] | int, seed: int
    ) -> tuple[State, list[Event]]:
        return self.record_versions(engine.new_game(rules, players, seed))

    # The calls of every step of a random game or a playout, bound straight to the engine's
    # functions: no adapter frame per call.
    pending = staticmethod(engine.pending)
    legal_commands = staticmethod(engine.legal_commands)  # type: ignore[assignment]
    decide = staticmethod(engine.decide)
    decide_into = staticmethod(engine.decide_into)
    determinize = staticmethod(views.determinize)
    public_view = staticmethod(views.public_view)  # type: ignore[assignment]
    policy_view = staticmethod(views.policy_view)  # type: ignore[assignment]
    turn_positions = staticmethod(views.start_positions)  # type: ignore[assignment]

    def is_over(self, state: State) -> bool:
        return state.stage == "over"

    def results(self, state: State) -> list[SeatResult]:
        return self.seat_results(score(state), BREAKDOWN, state.names)

    # --- plug-ins -------------------------------------------------------------------------

    def evaluate(self, state: State) -> list[float]:
        """The score now plus what each seat's assets will still bring
        (:func:`.evaluation.expected_totals`); the exact score once the game is over."""
        return expected_totals(state)

    def policy(self) -> Policy:
        return greedy_values

    def search_hints(self) -> SearchHints:
        """How the search reads :meth:`evaluate` (:data:`.evaluation.SEARCH_HINTS`)."""
        return SEARCH_HINTS

    def state_policy(self) -> StatePolicy:
        """The same policy read off a whole state: no view built per playout step."""
        return state_values

    def labels(self) -> dict[str, dict[str, str]]:
        """Readable names for the analytics: the map's regions, the buildings' columns,
        the score columns and the facts."""
        return _labels()

    def facts(self, state: State, event: Event) -> list[Fact]:
        """Explorations (with their bonus), colonies by good (with their price), buildings
        (with their price) and privileges (with their payout)."""
        d = event.data
        if event.type == "explored":
            return [Fact("exploration", d["seat"], d["region"], d["bonus"])]
        if event.type == "colony_founded":
            return [Fact("colony", d["seat"], d["good"], d["price"])]
        if event.type == "building_bought":
            return [Fact("building_bought", d["seat"], d["building"], d["price"])]
        if event.type == "privilege_taken":
            return [Fact("privilege", d["seat"], d["column"], d["income"])]
        return []


@cache
def _labels() -> dict[str, dict[str, str]]:
    columns = {f"{c}_vp": f"{c.capitalize()} VP" for c in COLUMNS}
    return {
        "subjects": named_ids(FILES.load("standard")),
        "columns": {**columns, "total": "Total"},
        "facts": {
            "exploration": "Explorations",
            "colony": "Colonies founded",
            "building_bought": "Buildings bought",
            "privilege": "Privileges taken",
        },
    }
