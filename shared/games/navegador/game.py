"""Navegador behind the :class:`~shared.games.api.Game` protocol.

A thin adapter over the rules modules beside it: the rules cache, the (empty) options
model, seat results, hidden information and the bots' plug-ins.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping, Sequence
from functools import cache, lru_cache
from typing import Any

from pydantic import BaseModel, ConfigDict, create_model

from ..analytics import named_ids
from ..api import (
    Command,
    Event,
    Fact,
    Observation,
    Policy,
    SearchHints,
    SeatResult,
    StatePolicy,
)
from ..ruleset_files import CARRIED, file_text
from . import engine, views
from .commands import COMMAND_TYPES, command_from_dict
from .evaluation import SEARCH_HINTS, expected_totals
from .evolve import apply as apply_event
from .evolve import evolve as evolve_state
from .greedy import greedy_values, state_values
from .ruleset import COLUMNS, Rules, available_rulesets, compile_rules, load_ruleset, loads_ruleset
from .sampling import Sampler
from .scoring import BREAKDOWN, score
from .state import State, blank_state


class Navegador:
    """The game, as the registry hands it to services."""

    name = engine.NAME
    title = "Navegador"
    default_ruleset = "standard"

    def __init__(self) -> None:
        standard = load_ruleset(self.default_ruleset)
        self.min_players = standard.min_players
        self.max_players = standard.max_players

    # --- rulesets and options -------------------------------------------------------------

    def rulesets(self) -> list[str]:
        return available_rulesets()

    def options_model(self, ruleset: str) -> type[BaseModel]:
        return _options_model()

    def rules(self, ruleset: str, options: Mapping[str, Any] | None = None) -> Rules:
        if options:
            return compile_rules(load_ruleset(ruleset), dict(options))  # refuses them
        return _rules(ruleset)

    def rules_named(self, data: Mapping[str, Any]) -> Rules:
        """The rules a ``game_created`` event's data, a snapshot or a view names: the
        ruleset file it carries, else the shipped ruleset of its name."""
        file = data.get(CARRIED)
        if file is None:
            return self.rules(data["ruleset"], data["options"])
        return _carried_rules(file)

    def command_types(self) -> Mapping[str, type[Command]]:
        return COMMAND_TYPES

    # --- playing --------------------------------------------------------------------------

    def new_game(
        self, rules: Rules, players: Sequence[str] | int, seed: int
    ) -> tuple[State, list[Event]]:
        return engine.new_game(rules, players, seed)

    def initial(self, first: Event) -> State:
        if first.type != "game_created":
            raise ValueError(f"a log starts with game_created, not {first.type}")
        data = first.data
        return blank_state(self.rules_named(data), len(data["players"]))

    # The three calls of every step of a random game or a playout, bound straight to the
    # engine's functions: no adapter frame per call.
    pending = staticmethod(engine.pending)
    legal_commands = staticmethod(engine.legal_commands)
    decide_into = staticmethod(engine.decide_into)

    def parse_command(self, raw: Any) -> Command:
        return command_from_dict(raw)

    def decide(self, state: State, command: Command) -> list[Event]:
        return engine.decide(state, command)

    def apply(self, state: State, event: Event) -> None:
        apply_event(state, event)

    def evolve(self, state: State, event: Event) -> State:
        return evolve_state(state, event)

    def replay(self, events: Iterable[Event]) -> State:
        it = iter(events)
        state = self.initial(first := next(it))
        apply_event(state, first)
        for event in it:
            apply_event(state, event)
        return state

    def is_over(self, state: State) -> bool:
        return state.stage == "over"

    def results(self, state: State) -> list[SeatResult]:
        return [
            SeatResult(
                seat=row["seat"],
                place=row["place"],
                total=row["total"],
                breakdown={k: row[k] for k in BREAKDOWN},
                tiebreak=tuple(row["tiebreak"]),
                side=state.names[row["seat"]],
            )
            for row in score(state)
        ]

    # --- hidden information ---------------------------------------------------------------

    def view(self, state: State, seat: int | None) -> Observation:
        return views.view(state, seat)

    def view_schema(self) -> dict[str, Any]:
        """From the types in :mod:`.view_model`, imported here so that processes that never
        document views do not build its schemas."""
        from . import view_model

        return copy.deepcopy(view_model.view_schema())

    def determinize(self, state: State, seed: int) -> State:
        return views.determinize(state, seed)

    def sampler(self, observation: Observation) -> Sampler:
        return Sampler(self.rules_named(observation), observation)

    # --- persistence ----------------------------------------------------------------------

    def snapshot(self, state: State) -> dict[str, Any]:
        return state.to_snapshot()

    def restore(self, snapshot: dict[str, Any]) -> State:
        return State.from_snapshot(self.rules_named(snapshot), snapshot)

    def state_hash(self, state: State) -> str:
        return state.state_hash()

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
        """The same policy read off a whole state (:func:`~shared.games.api.state_policy`)."""
        return state_values

    def turn_positions(self, state: State) -> list[int]:
        """Per seat, its place in the turn order: the start player (drawn at setup) first,
        then clockwise."""
        return [(seat - state.start) % state.n for seat in range(state.n)]

    def labels(self) -> dict[str, dict[str, str]]:
        """Readable names for the analytics: the map's regions, the goods, the buildings'
        columns, the score columns and the facts."""
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


@lru_cache(maxsize=16)
def _rules(ruleset: str) -> Rules:
    """Compiled rules, once per ruleset: a load must not reparse files."""
    file = file_text(ruleset)
    return compile_rules(load_ruleset(ruleset) if file is None else loads_ruleset(file), file=file)


@lru_cache(maxsize=16)
def _carried_rules(file: str) -> Rules:
    """Compiled rules of a ruleset file's text a log, a snapshot or a view carries, once per
    file: a bot's sampler is made at every decision."""
    return compile_rules(loads_ruleset(file), file=file)


@cache
def _options_model() -> type[BaseModel]:
    """Navegador has no edition options: an empty model that refuses any."""
    return create_model("NavegadorOptions", __config__=ConfigDict(extra="forbid"))


@cache
def _labels() -> dict[str, dict[str, str]]:
    columns = {f"{c}_vp": f"{c.capitalize()} VP" for c in COLUMNS}
    return {
        "subjects": named_ids(load_ruleset("standard")),
        "columns": {**columns, "total": "Total"},
        "facts": {
            "exploration": "Explorations",
            "colony": "Colonies founded",
            "building_bought": "Buildings bought",
            "privilege": "Privileges taken",
        },
    }
