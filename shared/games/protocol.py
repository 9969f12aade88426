"""The Game protocol and the types every game shares.

Services never import a game: they ask the registry (:mod:`.registry`) for a :class:`Game` by
the name its log's ``game_created`` event carries, and drive it through this protocol. A game
says what it is in a declarative :class:`GameInfo` (players, chance, hidden information,
which optional parts it has), so no caller probes a game for an attribute.

The rules cores behind the protocol stay pure: no I/O, no clock, and no randomness outside
the generator kept in the state, whose draws are recorded in the events' ``secret`` part.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, NamedTuple, Protocol, TypeVar

from pydantic import BaseModel

if TYPE_CHECKING:
    from .commands import Command
    from .events import EventData

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


@dataclass(frozen=True)
class SearchHints:
    """How the ``mcts`` search should read one game (:meth:`Game.search_hints`); a game that
    declares none (:attr:`GameInfo.search_hints`) gets these defaults.

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


@dataclass(frozen=True)
class GameInfo:
    """What a game is, declared once: the catalog, the lobby and the bots read it instead of
    probing the game for attributes.

    ``chance``: whether the game draws anything (a shuffle, a die, a start player);
    ``hidden_information``: whether a seat's view leaves something out (face-down tiles, a
    hand); ``score_bounds``: the lowest and highest total a seat can end with, roughly (what
    a rating or a chart scales by). The optional parts the game provides beyond the protocol's
    defaults: ``greedy_policy`` (:meth:`Game.policy`), ``state_policy`` (a fast
    :meth:`Game.state_policy` of its own), ``search_hints`` (its own
    :meth:`Game.search_hints`), ``facts`` (:meth:`Game.facts` yields some), ``sampler``
    (:meth:`Game.sampler` draws states), and ``board``: the name of the web client's board
    drawing for it (``None``: the generic view).
    """

    name: str
    title: str
    min_players: int
    max_players: int
    default_ruleset: str = "standard"
    chance: bool = True
    hidden_information: bool = True
    score_bounds: tuple[int, int] = (0, 100)
    greedy_policy: bool = False
    state_policy: bool = False
    search_hints: bool = False
    facts: bool = False
    sampler: bool = True
    board: str | None = None


def own_view(seat: int, legal: Iterable[Command]) -> Observation:
    """The private part every seat has: its number and its legal commands (wire form)."""
    return {"seat": seat, "legal_commands": [c.to_dict() for c in legal]}


def merge_views(public: Observation, private: Observation) -> Observation:
    """A seat's view from its two parts: the public view with the private part's top-level
    fields set over it (what :func:`shared.views.seat_part` takes apart again)."""
    return {**public, **private}


# --- the protocol ----------------------------------------------------------------------------


class Game(Protocol[S, R]):
    """What a game provides. ``S`` is its state (mutable, private to its owner), ``R`` its
    compiled rules (a ruleset with edition options applied, immutable and shared)."""

    info: GameInfo
    """What the game is and which optional parts it has."""

    @property
    def name(self) -> str:
        """The game's name in the registry and in its logs (``info.name``)."""
        ...

    @property
    def title(self) -> str: ...

    @property
    def min_players(self) -> int: ...

    @property
    def max_players(self) -> int: ...

    @property
    def default_ruleset(self) -> str: ...

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

    def event_types(self) -> Mapping[str, type[EventData]]:
        """Every event the game's logs hold, by wire name: the shape of each one's ``data``
        (:mod:`.events`)."""
        ...

    def upcast(self, event: Event, written: Mapping[str, int] | None = None) -> Event:
        """A stored event in its type's current shape, through the steps its class declares
        (:mod:`.events`); ``written``: the versions its log's ``game_created`` recorded."""
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
        never a hidden value: the public view for a spectator, else
        ``merge_views(public_view(state), private_view(state, seat))``."""
        ...

    def public_view(self, state: S) -> Observation:
        """What every seat and every spectator sees (the spectator's view): computed once
        per event, whatever the number of seats."""
        ...

    def private_view(self, state: S, seat: int) -> Observation:
        """What ``seat`` alone sees, as top-level fields set over the public view (its
        ``seat``, its legal commands, its hand, its secret choices): only fields that differ
        from the public view's."""
        ...

    def private_part(self, state: S, seat: int) -> Observation:
        """:meth:`private_view` without its ``legal_commands``, made without listing them:
        the engine puts a bot seat's own view (``merge_views(public_view(state),
        private_part(state, seat))``) in its decision request, whose legal commands it
        lists already (listing them again was about a fifth of the view's cost)."""
        ...

    def policy_view(self, state: S, seat: int) -> Observation | None:
        """The part of ``seat``'s view (its own, :meth:`view`'s, never anything else) that
        the game's greedy policy reads, in the view's shape, made straight from the state:
        ``policy(policy_view(s, seat) + legal)`` gives ``policy(view(s, seat))``'s values.
        The engine sends it to a greedy bot seat instead of the whole view. ``None``: the
        game has none (its greedy seats get the whole view)."""
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

    def state_policy(self) -> StatePolicy | None:
        """The greedy policy read off whole states: the game's own fast form
        (``info.state_policy``), else its view policy applied to the seat's view; ``None``
        when the game has no policy."""
        ...

    def search_hints(self) -> SearchHints:
        """How the search reads the game (the defaults unless ``info.search_hints``)."""
        ...

    def facts(self, state: S, event: Event) -> list[Fact]:
        """Analytics facts ``event`` produced; ``state`` is the state after it."""
        ...

    def turn_positions(self, state: S) -> list[int]:
        """Each seat's 0-based position in the turn order the game started with (seat ->
        position), once the setup has drawn it: what analytics compare seats by."""
        ...

    def labels(self) -> dict[str, dict[str, str]]:
        """Readable names of the game's ids by namespace (``options``, ``values``,
        ``sides``, ``subjects``, ``columns``, ``facts``): what clients and the analytics show
        instead of an id; an id without one is made readable by whoever shows it."""
        ...


AnyGame = Game[Any, Any]
