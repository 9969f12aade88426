"""The Game protocol, the types every game shares, and the registry of games.

Services never import a game: they ask the registry (:func:`get`, :func:`names`) for a
:class:`Game` by the name its log's ``game_created`` event carries, and drive it through this
protocol. A game is one package under ``shared/games/`` whose ``__init__`` calls
:func:`register`; the registry imports every such package the first time it is asked, so a
new game needs nothing but its package.

The rules cores behind the protocol stay pure: no I/O, no clock, and no randomness outside
the generator kept in the state, whose draws are recorded in the events' ``secret`` part.
"""

from __future__ import annotations

import importlib
import pkgutil
import random
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import MISSING, dataclass, field, fields
from typing import Any, ClassVar, Literal, NamedTuple, Protocol, TypeVar

from pydantic import BaseModel, TypeAdapter

DEFAULT_GAME = "age_of_discovery"
"""The game of logs, tables and requests that name none (everything before games had names)."""

GAME_CREATED = "game_created"
"""Every log's first event; its data names the ``game``, ``ruleset``, ``options`` and
``players``."""
GAME_ENDED = "game_ended"
"""The last event of every finished game's log: followers close their streams on it."""

Observation = dict[str, Any]
"""A seat's view as :meth:`Game.view` returns it (JSON-ready, its legal commands included)."""

Policy = Callable[[Observation, random.Random], list[float]]
"""A game's greedy policy: a value for each of the observation's legal commands."""

StatePolicy = Callable[[Any, int, "Sequence[Command]", random.Random], list[float]]
"""The greedy policy read off a whole state for one seat: a value for each of ``legal``
(the seat's legal commands in that state, in :meth:`Game.legal_commands`' order), as
:data:`Policy` gives them from the seat's view. The search's playouts own whole states (drawn
from the bot's observation), so a game may offer this to spare building a view per step."""


# --- shared types ----------------------------------------------------------------------------


class RuleViolation(Exception):
    """A command the rules refuse: a machine-readable ``code`` and a human ``reason``."""

    def __init__(self, code: str, reason: str) -> None:
        super().__init__(f"{code}: {reason}")
        self.code = code
        self.reason = reason


class RulesetError(ValueError):
    """A ruleset file, a ruleset name or an edition option that cannot be used."""


class UnknownGame(LookupError):
    """No registered game has this name; ``known`` lists the names that are."""

    def __init__(self, name: object, known: Sequence[str]) -> None:
        super().__init__(f"unknown game {name!r}; known: {', '.join(known)}")
        self.name = name
        self.known = list(known)


class Decision(NamedTuple):
    """Who must decide what now: ``kind`` names the step (place, land, buy, ...)."""

    seat: int
    kind: str


PUBLIC: Literal["public"] = "public"
Visibility = Literal["public"] | int
"""Who may see an event: everyone, or one seat (a private choice before it is revealed)."""


class Event(NamedTuple):
    """A fact in a game's log.

    ``data`` is public. ``secret`` holds server-only values (face-down tiles, pile orders,
    the generator state); a redacted copy drops it. ``visibility`` is ``"public"`` or the
    one seat that may see the event (a private choice before it is revealed).
    """

    type: str
    data: dict[str, Any]
    secret: dict[str, Any] | None = None
    visibility: Visibility = PUBLIC

    def to_dict(self, include_secret: bool = True) -> dict[str, Any]:
        out: dict[str, Any] = {"type": self.type, "data": self.data, "visibility": self.visibility}
        if include_secret and self.secret is not None:
            out["secret"] = self.secret
        return out

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> Event:
        return cls(raw["type"], raw["data"], raw.get("secret"), raw.get("visibility", PUBLIC))

    def redacted(self) -> Event:
        """The event as a player may receive it: no server-only values."""
        return self if self.secret is None else Event(self.type, self.data, None, self.visibility)

    def visible_to(self, seat: int | None) -> bool:
        return self.visibility == PUBLIC or (seat is not None and self.visibility == seat)


@dataclass(frozen=True, slots=True)
class Command:
    """Base of every game's commands: a small frozen dataclass naming the seat.

    ``type`` is the wire name. Fields may be ``int``, ``str``, ``bool``, their ``| None``
    forms and ``tuple[str, ...]``: what :func:`parse_command` checks and JSON carries.
    """

    type: ClassVar[str] = "command"
    seat: int

    def to_dict(self) -> dict[str, Any]:
        """The wire form: ``type`` plus every field (tuples as lists)."""
        out: dict[str, Any] = {"type": self.type}
        for name, _, _ in _specs(type(self)):
            value = getattr(self, name)
            out[name] = list(value) if isinstance(value, tuple) else value
        return out


_FIELD_TYPES: dict[str, type | tuple[type, ...]] = {
    "int": int,
    "str": str,
    "bool": bool,
    "int | None": (int, type(None)),
    "str | None": (str, type(None)),
}
_SPECS: dict[type[Command], tuple[tuple[str, str, bool], ...]] = {}


def _specs(cls: type[Command]) -> tuple[tuple[str, str, bool], ...]:
    """(name, declared type, has a default) for each field of a command class, once."""
    specs = _SPECS.get(cls)
    if specs is None:
        specs = _SPECS[cls] = tuple(
            (f.name, str(f.type), f.default is not MISSING) for f in fields(cls)
        )
    return specs


def parse_command(raw: Any, types: Mapping[str, type[Command]]) -> Command:
    """Parse a command of one of ``types`` from JSON-like data, refusing anything malformed
    with a :class:`RuleViolation` (``malformed`` or ``unknown_command``)."""
    if not isinstance(raw, dict):
        raise RuleViolation("malformed", "a command is a JSON object")
    kind = raw.get("type")
    cls = types.get(kind) if isinstance(kind, str) else None
    if cls is None:
        raise RuleViolation("unknown_command", f"unknown command type {kind!r}")
    specs = _specs(cls)
    args: dict[str, Any] = {}
    for name, declared, has_default in specs:
        if name not in raw:
            if has_default:
                continue
            raise RuleViolation("malformed", f"{kind}: missing field {name!r}")
        value = raw[name]
        if declared == "tuple[str, ...]":
            if not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
                raise RuleViolation("malformed", f"{kind}.{name}: expected a list of strings")
            value = tuple(value)
        elif isinstance(value, bool) != (declared == "bool") or not isinstance(
            value, _FIELD_TYPES[declared]
        ):
            raise RuleViolation("malformed", f"{kind}.{name}: expected {declared}")
        args[name] = value
    if len(raw) > len(args) + 1:
        unknown = set(raw) - {name for name, _, _ in specs} - {"type"}
        if unknown:
            raise RuleViolation("malformed", f"{kind}: unknown fields {sorted(unknown, key=str)}")
    return cls(**args)


def command_schema(cls: type[Command]) -> dict[str, Any]:
    """The JSON schema of one command's wire form (for the catalog and OpenAPI)."""
    schema = TypeAdapter(cls).json_schema()
    schema["title"] = cls.type
    schema["properties"] = {"type": {"const": cls.type}, **schema.get("properties", {})}
    schema["required"] = ["type", *schema.get("required", [])]
    if cls.__doc__ and cls.__doc__ != Command.__doc__:
        schema["description"] = " ".join(cls.__doc__.split())
    return schema


def command_wire_schema(cls: type[Command]) -> dict[str, Any]:
    """The JSON schema of a command exactly as :meth:`Command.to_dict` writes it (a view's
    legal commands): every field present, defaults included, and nothing else."""
    schema = command_schema(cls)
    schema["required"] = list(schema["properties"])
    schema["additionalProperties"] = False
    return schema


@dataclass(frozen=True)
class SeatResult:
    """One seat's standing: valid at any moment (live), final once the game is over.

    ``breakdown`` names the parts of ``total`` (colonies, discoveries, ...), ``tiebreak``
    the keys that order equal totals, and ``side`` what the seat plays (a nation, a colour).
    """

    seat: int
    place: int
    total: int
    breakdown: dict[str, int]
    tiebreak: tuple[int, ...] = ()
    side: str = ""


class Fact(NamedTuple):
    """A game-specific analytics fact an event produced: ``kind`` (``building_bought``,
    ``discovery``), the seat, what it concerns and a number (a price, a count)."""

    kind: str
    seat: int
    subject: str
    value: int = 0


S = TypeVar("S")
R = TypeVar("R")
S_co = TypeVar("S_co", covariant=True)


class Sampler(Protocol[S_co]):
    """Whole states consistent with one seat's observation: the search bots'
    determinizations. ``sample`` depends on the observation and ``seed`` alone."""

    def sample(self, seed: int) -> S_co: ...


# --- the protocol ----------------------------------------------------------------------------


class Game(Protocol[S, R]):
    """What a game provides. ``S`` is its state (mutable, private to its owner), ``R`` its
    compiled rules (a ruleset with edition options applied, immutable and shared)."""

    name: str
    title: str
    min_players: int
    max_players: int
    default_ruleset: str

    # Rulesets and options
    def rulesets(self) -> list[str]:
        """The rulesets the game ships, by name."""
        ...

    def options_model(self, ruleset: str) -> type[BaseModel]:
        """The edition options of ``ruleset`` as a pydantic model (defaults filled in)."""
        ...

    def rules(self, ruleset: str, options: Mapping[str, Any] | None = None) -> R:
        """Compiled rules for a shipped ruleset (or a ruleset file's path) and options,
        cached; raises :class:`RulesetError` naming what is wrong."""
        ...

    def rules_named(self, data: Mapping[str, Any]) -> R:
        """The rules a ``game_created`` event's data, a snapshot or a view names (its
        ``ruleset`` and ``options``, or the ruleset file it carries): how a replay, a
        restore or a bot finds a game's rules, with no file at hand."""
        ...

    def command_types(self) -> Mapping[str, type[Command]]:
        """Every command the game takes, by wire name."""
        ...

    # Playing
    def new_game(self, rules: R, players: Sequence[str] | int, seed: int) -> tuple[S, list[Event]]:
        """The initial state and the events that produce it; the first is ``game_created``
        with ``game``, ``ruleset``, ``options`` and ``players`` in its data. The event that
        ends the game (when :meth:`is_over` turns true) is ``game_ended``."""
        ...

    def initial(self, first: Event) -> S:
        """The blank state a log starting with ``first`` (its ``game_created``) applies to."""
        ...

    def pending(self, state: S) -> Sequence[Decision]:
        """Who must decide what now (empty once the game is over)."""
        ...

    def legal_commands(self, state: S, seat: int) -> list[Command]:
        """Every command ``seat`` may send now."""
        ...

    def parse_command(self, raw: Any) -> Command:
        """A command from its wire form; :class:`RuleViolation` if malformed."""
        ...

    def decide(self, state: S, command: Command) -> list[Event]:
        """The events ``command`` causes, up to the next real decision; ``state`` is left
        unchanged. Raises :class:`RuleViolation` (state unchanged) for a refused command."""
        ...

    def decide_into(self, state: S, command: Command, *, trusted: bool = False) -> list[Event]:
        """:meth:`decide` applying the events to ``state`` in place: the fast path of the
        engine and the search. A refused command leaves ``state`` unchanged.

        ``trusted=True`` is the caller's word that ``command`` is one of
        ``legal_commands(state, command.seat)`` for a seat :meth:`pending` names, taken from
        that list with ``state`` unchanged since: it is then not validated again (validating
        re-derives what ``legal_commands`` just listed, about a fifth of a random game's
        time). Only for commands the caller drew itself (random play, the search's tree and
        playouts); a command from anywhere else (a player, a bot's answer, a log) is decided
        untrusted, the default, and a trusted command that is not legal may corrupt
        ``state``."""
        ...

    def apply(self, state: S, event: Event) -> None:
        """Apply one event in place: pure bookkeeping, no chance, no clock."""
        ...

    def evolve(self, state: S, event: Event) -> S:
        """The next state after ``event``; ``state`` is left as it was."""
        ...

    def replay(self, events: Iterable[Event]) -> S:
        """The state a whole log (``game_created`` first) produces."""
        ...

    def is_over(self, state: S) -> bool: ...

    def results(self, state: S) -> list[SeatResult]:
        """Each seat's total, breakdown and place (rulebook tie-breakers), at any moment."""
        ...

    # Hidden information
    def view(self, state: S, seat: int | None) -> Observation:
        """What ``seat`` (``None``: a spectator) may see, with the seat's legal commands;
        never a hidden value."""
        ...

    def view_schema(self) -> dict[str, Any]:
        """The JSON schema of :meth:`view`'s answer, a seat's or a spectator's (local
        ``$defs`` references): what clients and the OpenAPI document rely on, kept exact
        enough that a test validating real views against it catches a view that drifts."""
        ...

    def determinize(self, state: S, seed: int) -> S:
        """A copy whose hidden values are resampled consistently with everything public."""
        ...

    def sampler(self, observation: Observation) -> Sampler[S]:
        """Draws whole states consistent with a seat's observation (search bots)."""
        ...

    # Persistence
    def snapshot(self, state: S) -> dict[str, Any]:
        """Every field, hidden ones included (server only), JSON-ready."""
        ...

    def restore(self, snapshot: dict[str, Any]) -> S: ...

    def state_hash(self, state: S) -> str:
        """Equal states, equal hashes: replay checks."""
        ...

    # Plug-ins for bots and analytics
    def evaluate(self, state: S) -> list[float]:
        """Each seat's expected final total, roughly: how playouts judge a position."""
        ...

    def policy(self) -> Policy | None:
        """The game's greedy policy (values of legal commands), if it has one."""
        ...

    def facts(self, state: S, event: Event) -> list[Fact]:
        """Analytics facts ``event`` produced; ``state`` is the state after it."""
        ...


AnyGame = Game[Any, Any]


# --- the registry ----------------------------------------------------------------------------

_GAMES: dict[str, AnyGame] = {}
_STATE_TYPES: dict[type, AnyGame] = {}
_discovered = False


def register(game: AnyGame, state_type: type) -> AnyGame:
    """Make ``game`` known under its name; ``state_type`` lets :func:`of` find it."""
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


def state_policy(game: AnyGame) -> StatePolicy | None:
    """The game's greedy policy on whole states: its own ``state_policy()`` when it has one
    (an optional plug-in, the fast path of the search's playouts), else its view policy
    applied to the seat's view; ``None`` when the game has no policy."""
    policy = game.policy()
    if policy is None:
        return None
    own = getattr(game, "state_policy", None)
    if own is not None:
        fast: StatePolicy = own()
        return fast
    view_policy: Policy = policy

    def through_view(
        state: Any, seat: int, legal: Sequence[Command], rnd: random.Random
    ) -> list[float]:
        return view_policy(game.view(state, seat), rnd)

    return through_view


@dataclass(frozen=True)
class SearchHints:
    """How the ``mcts`` search should read one game: an optional plug-in (a game's
    ``search_hints()``); a game without one gets these defaults.

    ``reward_scale``: points of lead over the best rival worth about three quarters of a win
    (the rewards squash each seat's margin by it): it must match the game's score range and
    its evaluation's error, or the rewards saturate and the search sees no difference.
    ``rollout_decisions``: decisions a playout plays before the evaluation judges.
    ``turn_start``: the decision kind that begins a seat's turn; when given, a playout goes on
    past ``rollout_decisions`` to the observer's next turn start, so every playout is judged
    with every seat having had the same number of turns since the root (a cut mid-round
    favours whoever just moved).
    ``search_opponents``: whether the tree searches the other seats' choices too (each
    maximising its own reward); when not, they play the game's policy in the tree as in the
    playouts, and every iteration goes to the observer's own choices.
    """

    reward_scale: float = 4.0
    rollout_decisions: int = 32
    turn_start: str | None = None
    search_opponents: bool = True


def search_hints(game: AnyGame) -> SearchHints:
    """The game's own :class:`SearchHints` when it offers them, else the defaults."""
    own = getattr(game, "search_hints", None)
    if own is None:
        return SearchHints()
    hints: SearchHints = own()
    return hints


def bot_levels(game: AnyGame) -> list[str]:
    """The bot levels that can play ``game``: ``random`` and ``mcts`` play any game through
    the protocol; ``greedy`` needs the game's policy."""
    return ["random", *(["greedy"] if game.policy() is not None else []), "mcts"]


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
    labels: dict[str, dict[str, str]] = field(default_factory=dict)
    """Readable names of the game's ids, by namespace (``options``, ``values``, ``sides``,
    ``subjects``...): the game's optional ``labels()`` plug-in; clients make any other id
    readable themselves."""


def game_labels(game: AnyGame) -> dict[str, dict[str, str]]:
    """The game's ``labels()`` plug-in (readable names of its ids by namespace), if it has
    one; no labels otherwise."""
    own = getattr(game, "labels", None)
    return {space: dict(names) for space, names in (own() if own is not None else {}).items()}


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
                labels=game_labels(game),
            )
        )
    return out


# --- random play -----------------------------------------------------------------------------
# Complete games between random legal players, in process, for any registered game: the
# CLI's ``simulate``, tests and benchmarks drive a game through its protocol alone.


@dataclass
class PlayedGame:
    """One finished game: its final state, whole log and how many decisions it took."""

    state: Any
    events: list[Event] = field(default_factory=list)
    decisions: int = 0


def play_random_game(
    game: AnyGame, rules: Any, players: int, seed: int, keep_log: bool = True
) -> PlayedGame:
    """Play one game to the end, every seat choosing uniformly among its legal commands.

    The same seed plays the same game: the chooser is seeded with it, like the deal."""
    chooser = random.Random(seed)
    state, events = game.new_game(rules, players, seed)
    played = PlayedGame(state, events if keep_log else [])
    # Bound once: this loop is the benchmark of the rules core.
    pending, legal_commands, decide_into = game.pending, game.legal_commands, game.decide_into
    choice = chooser.choice
    while decisions := pending(state):
        command = choice(legal_commands(state, choice(decisions).seat))
        new_events = decide_into(state, command, trusted=True)  # drawn from the legal list
        if keep_log:
            played.events += new_events
        played.decisions += 1
    return played
