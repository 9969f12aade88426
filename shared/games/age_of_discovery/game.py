"""The Age of Discovery behind the :class:`~shared.games.api.Game` protocol.

A thin adapter: the rules live in the modules beside it. It adds the one rules cache
(compiled rules per ruleset and options), the options model the lobby and the CLI validate
with, the seat results every service reads, and the bots' plug-ins (greedy policy, playout
evaluation).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable, Mapping, Sequence
from functools import cache, lru_cache
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, create_model

from ..analytics import named_ids
from ..api import (
    Command,
    Event,
    Fact,
    Observation,
    Policy,
    SeatResult,
    StatePolicy,
)
from ..ruleset_files import CARRIED, file_text
from . import engine, views
from .commands import COMMAND_TYPES, command_from_dict

# Not ``from . import evolve``: the package's ``__init__`` rebinds ``evolve`` to the function.
from .evolve import apply as apply_event
from .evolve import evolve as evolve_state
from .greedy import greedy_values, state_values
from .ruleset import Rules, available_rulesets, compile_rules, load_ruleset, loads_ruleset
from .sampling import Sampler
from .scoring import colony_vp, score
from .state import GameState, blank_state

NAME = "age_of_discovery"
MONEY_PER_VP = 4.0  # money left is worth something in a playout: buildings, tie-breaks
BREAKDOWN = ("colonies", "discoveries", "buildings", "economy")


class AgeOfDiscovery:
    """The game, as the registry hands it to services."""

    name = NAME
    title = "The Age of Discovery"
    default_ruleset = "standard"

    def __init__(self) -> None:
        standard = load_ruleset(self.default_ruleset)
        self.min_players = standard.min_players
        self.max_players = standard.max_players

    # --- rulesets and options -------------------------------------------------------------

    def rulesets(self) -> list[str]:
        return available_rulesets()

    def options_model(self, ruleset: str) -> type[BaseModel]:
        return _options_model(ruleset)

    def rules(self, ruleset: str, options: Mapping[str, Any] | None = None) -> Rules:
        return _rules(ruleset, json.dumps(dict(options or {}), sort_keys=True))

    def rules_named(self, data: Mapping[str, Any]) -> Rules:
        """The rules a ``game_created`` event's data, a snapshot or a view names: the
        ruleset file it carries, else the shipped ruleset of its name, with its options."""
        file = data.get(CARRIED)
        if file is None:
            return self.rules(data["ruleset"], data["options"])
        return _carried_rules(file, json.dumps(dict(data["options"]), sort_keys=True))

    def command_types(self) -> Mapping[str, type[Command]]:
        return COMMAND_TYPES

    # --- playing --------------------------------------------------------------------------

    def new_game(
        self, rules: Rules, players: Sequence[str] | int, seed: int
    ) -> tuple[GameState, list[Event]]:
        return engine.new_game(rules, None, players, seed)

    def initial(self, first: Event) -> GameState:
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

    def decide(self, state: GameState, command: Command) -> list[Event]:
        return engine.decide(state, command)

    def apply(self, state: GameState, event: Event) -> None:
        apply_event(state, event)

    def evolve(self, state: GameState, event: Event) -> GameState:
        return evolve_state(state, event)

    def replay(self, events: Iterable[Event]) -> GameState:
        it = iter(events)
        first = next(it)
        state = self.initial(first)
        apply_event(state, first)
        for event in it:
            apply_event(state, event)
        return state

    def is_over(self, state: GameState) -> bool:
        return state.phase == "over"

    def results(self, state: GameState) -> list[SeatResult]:
        nations = state.rules.ruleset.nations
        return [
            SeatResult(
                seat=row["seat"],
                place=row["place"],
                total=row["total"],
                breakdown={k: row[k] for k in BREAKDOWN},
                tiebreak=tuple(row["tiebreak"]),
                side=nations[row["seat"]].name,
            )
            for row in score(state)
        ]

    # --- hidden information ---------------------------------------------------------------

    def view(self, state: GameState, seat: int | None) -> Observation:
        return views.view(state) if seat is None else views.seat_view(state, seat)

    def view_schema(self) -> dict[str, Any]:
        """Described by types in :mod:`.view_model`, apart from ``views`` (kept fast);
        imported here, so that processes that never document views (bots, the engine) do not
        build its pydantic schemas at import."""
        from . import view_model

        return copy.deepcopy(view_model.view_schema())

    def determinize(self, state: GameState, seed: int) -> GameState:
        return views.determinize(state, seed)

    def sampler(self, observation: Observation) -> Sampler:
        return Sampler(self.rules_named(observation), observation)

    # --- persistence ----------------------------------------------------------------------

    def snapshot(self, state: GameState) -> dict[str, Any]:
        return state.to_snapshot()

    def restore(self, snapshot: dict[str, Any]) -> GameState:
        return GameState.from_snapshot(self.rules_named(snapshot), snapshot)

    def state_hash(self, state: GameState) -> str:
        return state.state_hash()

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
        """The same policy read off a whole state (:func:`~shared.games.api.state_policy`)."""
        return state_values

    def turn_positions(self, state: GameState) -> list[int]:
        """Per seat, its place in the turn order (read at the first decision: the drawn
        order, or with ``starting_order=auction`` the seat order the auction starts from)."""
        positions = [0] * state.n
        for position, seat in enumerate(state.order):
            positions[seat] = position
        return positions

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


@lru_cache(maxsize=64)
def _rules(ruleset: str, options: str) -> Rules:
    """Compiled rules, once per ruleset and options: a load must not reparse files."""
    file = file_text(ruleset)
    loaded = load_ruleset(ruleset) if file is None else loads_ruleset(file)
    return compile_rules(loaded, json.loads(options), file)


@lru_cache(maxsize=16)
def _carried_rules(file: str, options: str) -> Rules:
    """Compiled rules of a ruleset file's text a log, a snapshot or a view carries, and
    options, once each: a bot's sampler is made at every decision."""
    return compile_rules(loads_ruleset(file), json.loads(options), file)


@cache
def _options_model(ruleset: str) -> type[BaseModel]:
    """The ruleset's edition options as a model: each a literal of its choices, the first
    the default."""
    choices = load_ruleset(ruleset).options
    fields: dict[str, Any] = {
        key: (Literal[tuple(values)], Field(default=values[0])) for key, values in choices.items()
    }
    return create_model(
        "AgeOfDiscoveryOptions",
        __config__=ConfigDict(extra="forbid"),
        **fields,
    )


@cache
def _labels() -> dict[str, dict[str, str]]:
    return {
        "subjects": {**named_ids(load_ruleset("standard")), "deck": "Discovery deck"},
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
