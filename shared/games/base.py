"""The base game every game package builds on, after OpenSpiel's Game/State split: the game
object is the stateless rules (what a ruleset compiles to, how a log replays, how an event
applies, how views are put together), the state is the game package's own mutable class.

:class:`BaseGame` supplies what every game did the same way: the rules caches, the options
model, replay and the initial state, the event dispatch (:class:`EventHandlers`), command
parsing, snapshots, the view merge (:meth:`BaseGame.view` from :meth:`~.protocol.Game.public_view`
and :meth:`~.protocol.Game.private_view`) and the defaults of the optional parts. A game
package subclasses it with its rules, its data, its views and its policy only.
"""

from __future__ import annotations

import copy
import importlib
import json
import random
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import lru_cache
from typing import Any, ClassVar, Generic, Literal, Protocol, Self, TypeVar

from pydantic import BaseModel, ConfigDict, Field, create_model

from .commands import Command, parse_command
from .events import EventData, upcast
from .protocol import (
    GAME_CREATED,
    Event,
    Fact,
    GameInfo,
    Observation,
    Policy,
    SearchHints,
    SeatResult,
    StatePolicy,
    merge_views,
    own_view,
)
from .ruleset_files import CARRIED, RulesetFiles, file_text


class GameState(Protocol):
    """What the base game needs of a game's state class."""

    def copy(self) -> Self: ...

    def to_snapshot(self) -> dict[str, Any]: ...

    def state_hash(self) -> str: ...


S = TypeVar("S", bound=GameState)
R = TypeVar("R")

Handler = Callable[[S, dict[str, Any], dict[str, Any] | None], None]


class EventHandlers(Generic[S]):
    """A game's event handlers by event type: ``@handles("colony_founded")`` registers one
    (it gets the state, the event's data and its secret part); :meth:`apply` dispatches. The
    engine calls ``table`` straight on its hot path."""

    def __init__(self) -> None:
        self.table: dict[str, Handler[S]] = {}

    def __call__(self, name: str) -> Callable[[Handler[S]], Handler[S]]:
        def register(fn: Handler[S]) -> Handler[S]:
            self.table[name] = fn
            return fn

        return register

    def emit(
        self, s: S, out: list[Event], type_: str, data: dict[str, Any], secret: Any = None
    ) -> None:
        """Make a public event: apply it to ``s`` (its handler called directly, as a rules
        core makes events a few times per decision) and record it in ``out``."""
        self.table[type_](s, data, secret)
        out.append(Event(type_, data, secret))

    def apply(self, s: S, event: Event) -> None:
        """Apply ``event`` to ``s`` in place."""
        self.table[event.type](s, event.data, event.secret)

    def evolve(self, state: S, event: Event) -> S:
        """The next state after ``event``; ``state`` is left as it was."""
        s = state.copy()
        self.apply(s, event)
        return s


class BaseGame(ABC, Generic[S, R]):
    """The parts of the :class:`~.protocol.Game` protocol every game shares.

    A subclass sets ``files`` (its ruleset files), ``handlers`` (its event handlers),
    ``commands`` and ``events`` (its command and event types by wire name), ``state_type``,
    ``sampler_type`` and ``view_model`` (the module whose ``view_schema()`` describes its
    views), calls
    ``super().__init__(info)``, and implements the rules: :meth:`compile`, :meth:`blank`,
    ``new_game``, ``pending``, ``legal_commands``, ``decide``, ``decide_into``, ``is_over``,
    ``results``, :meth:`public_view`, ``determinize``, ``evaluate``, :meth:`turn_positions`.
    """

    files: ClassVar[RulesetFiles[Any]]
    handlers: ClassVar[EventHandlers[Any]]
    commands: ClassVar[Mapping[str, type[Command]]]
    events: ClassVar[Mapping[str, type[EventData]]]
    state_type: ClassVar[type[Any]]
    sampler_type: ClassVar[type[Any]]
    view_model: ClassVar[str]

    def __init__(self, info: GameInfo) -> None:
        self.info = info
        # Compiled rules, once per ruleset (or file) and options: a load must not reparse
        # files, and a bot's sampler is made at every decision.
        self._named = lru_cache(maxsize=64)(self._compile_named)
        self._carried = lru_cache(maxsize=16)(self._compile_carried)
        self._options = lru_cache(maxsize=16)(self._options_model)

    # --- what the game is ------------------------------------------------------------------

    @property
    def name(self) -> str:
        return self.info.name

    @property
    def title(self) -> str:
        return self.info.title

    @property
    def min_players(self) -> int:
        return self.info.min_players

    @property
    def max_players(self) -> int:
        return self.info.max_players

    @property
    def default_ruleset(self) -> str:
        return self.info.default_ruleset

    # --- rulesets and options --------------------------------------------------------------

    @abstractmethod
    def compile(self, ruleset: Any, options: dict[str, Any], file: str | None) -> R:
        """The game's compiled rules for a validated ruleset and options (``file``: the
        ruleset file's text when it was given as a file)."""

    def option_choices(self, ruleset: Any) -> Mapping[str, Sequence[str]]:
        """The edition options of a validated ruleset, each with its choices (the first the
        default); none unless the game has some."""
        return {}

    def rulesets(self) -> list[str]:
        return self.files.available()

    def options_model(self, ruleset: str) -> type[BaseModel]:
        return self._options(ruleset)

    def rules(self, ruleset: str, options: Mapping[str, Any] | None = None) -> R:
        return self._named(ruleset, json.dumps(dict(options or {}), sort_keys=True))

    def rules_named(self, data: Mapping[str, Any]) -> R:
        """The ruleset file ``data`` carries, else the shipped ruleset of its name, with its
        options."""
        file = data.get(CARRIED)
        if file is None:
            return self.rules(data["ruleset"], data["options"])
        return self._carried(file, json.dumps(dict(data["options"]), sort_keys=True))

    def _compile_named(self, ruleset: str, options: str) -> R:
        file = file_text(ruleset)
        loaded = self.files.load(ruleset) if file is None else self.files.loads(file)
        return self.compile(loaded, json.loads(options), file)

    def _compile_carried(self, file: str, options: str) -> R:
        return self.compile(self.files.loads(file), json.loads(options), file)

    def _options_model(self, ruleset: str) -> type[BaseModel]:
        """The ruleset's edition options as a model: each a literal of its choices, the first
        the default; extra keys refused."""
        choices = self.option_choices(self.files.load(ruleset))
        fields: dict[str, Any] = {
            key: (Literal[tuple(values)], Field(default=values[0]))
            for key, values in choices.items()
        }
        return create_model(
            f"{type(self).__name__}Options", __config__=ConfigDict(extra="forbid"), **fields
        )

    def command_types(self) -> Mapping[str, type[Command]]:
        return self.commands

    def event_types(self) -> Mapping[str, type[EventData]]:
        return self.events

    def parse_command(self, raw: Any) -> Command:
        return parse_command(raw, self.commands)

    # --- event versions --------------------------------------------------------------------

    def event_versions(self) -> dict[str, int]:
        """The event types whose shape changed since the first, at their versions."""
        return {name: cls.version for name, cls in self.events.items() if cls.version > 1}

    def record_versions(self, made: tuple[S, list[Event]]) -> tuple[S, list[Event]]:
        """``new_game``'s result with the event versions in its ``game_created`` (once per
        log, nothing per event); a log whose types are all at 1 records nothing."""
        if versions := self.event_versions():
            made[1][0].data["event_versions"] = versions
        return made

    def upcast(self, event: Event, written: Mapping[str, int] | None = None) -> Event:
        """A stored event in its type's current shape (``written``: the versions the log's
        ``game_created`` recorded, if known; else each step runs, and leaves data already
        in its shape alone)."""
        cls = self.events.get(event.type)
        if cls is None or cls.version == 1:
            return event
        at = (written or {}).get(event.type, 1)
        return event if at >= cls.version else event._replace(data=upcast(cls, event.data, at))

    # --- playing ---------------------------------------------------------------------------

    @abstractmethod
    def blank(self, rules: R, players: int) -> S:
        """A state before its first event: the shape for ``players`` seats."""

    def initial(self, first: Event) -> S:
        if first.type != GAME_CREATED:
            raise ValueError(f"a log starts with {GAME_CREATED}, not {first.type}")
        data = first.data
        return self.blank(self.rules_named(data), len(data["players"]))

    def apply(self, state: S, event: Event) -> None:
        self.handlers.apply(state, event)

    def evolve(self, state: S, event: Event) -> S:
        result: S = self.handlers.evolve(state, event)
        return result

    def replay(self, events: Iterable[Event]) -> S:
        it = iter(events)
        state = self.initial(first := next(it))
        apply = self.handlers.apply
        if self.event_versions():
            written = first.data.get("event_versions")
            it = (self.upcast(event, written) for event in it)
        apply(state, first)
        for event in it:
            apply(state, event)
        return state

    @staticmethod
    def seat_results(
        rows: Iterable[Mapping[str, Any]], parts: Iterable[str], sides: Sequence[str]
    ) -> list[SeatResult]:
        """``results`` from a game's score rows (each with ``seat``, ``place``, ``total``,
        ``tiebreak`` and the breakdown ``parts``) and each seat's side."""
        parts = tuple(parts)
        return [
            SeatResult(
                seat=row["seat"],
                place=row["place"],
                total=row["total"],
                breakdown={k: row[k] for k in parts},
                tiebreak=tuple(row["tiebreak"]),
                side=sides[row["seat"]],
            )
            for row in rows
        ]

    # --- hidden information ----------------------------------------------------------------

    @abstractmethod
    def legal_commands(self, state: S, seat: int) -> list[Command]: ...

    @abstractmethod
    def public_view(self, state: S) -> Observation: ...

    def private_view(self, state: S, seat: int) -> Observation:
        """The seat's number and its legal commands; a game adds what else the seat alone
        sees."""
        return own_view(seat, self.legal_commands(state, seat))

    def private_part(self, state: S, seat: int) -> Observation:
        """:meth:`private_view` without the legal commands: the seat's number; a game whose
        private view has more (a hand, a secret choice) adds it here too."""
        return {"seat": seat}

    def policy_view(self, state: S, seat: int) -> Observation | None:
        """None: the game has no smaller view for its greedy policy (see the protocol)."""
        return None

    def view(self, state: S, seat: int | None) -> Observation:
        public = self.public_view(state)
        return public if seat is None else merge_views(public, self.private_view(state, seat))

    def view_schema(self) -> dict[str, Any]:
        """From the game's :attr:`view_model` module, imported here so that processes that
        never document views (bots, the engine) do not build its pydantic schemas."""
        schema: dict[str, Any] = importlib.import_module(self.view_model).view_schema()
        return copy.deepcopy(schema)

    def sampler(self, observation: Observation) -> Any:
        return self.sampler_type(self.rules_named(observation), observation)

    # --- persistence -----------------------------------------------------------------------

    def snapshot(self, state: S) -> dict[str, Any]:
        return state.to_snapshot()

    def restore(self, snapshot: dict[str, Any]) -> S:
        restored: S = self.state_type.from_snapshot(self.rules_named(snapshot), snapshot)
        return restored

    def state_hash(self, state: S) -> str:
        return state.state_hash()

    # --- optional parts: the defaults ------------------------------------------------------

    def policy(self) -> Policy | None:
        return None

    def state_policy(self) -> StatePolicy | None:
        """The view policy applied to the seat's view (a game with a fast form of its own
        overrides this and says so in ``info.state_policy``)."""
        policy = self.policy()
        if policy is None:
            return None
        view_policy: Policy = policy

        def through_view(
            state: Any, seat: int, legal: Sequence[Command], rnd: random.Random
        ) -> list[float]:
            return view_policy(self.view(state, seat), rnd)

        return through_view

    def search_hints(self) -> SearchHints:
        return SearchHints()

    def facts(self, state: S, event: Event) -> list[Fact]:
        return []

    def labels(self) -> dict[str, dict[str, str]]:
        return {}

    @abstractmethod
    def turn_positions(self, state: S) -> list[int]: ...
