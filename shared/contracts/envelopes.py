"""Envelope models. Services add ids, times and routing; the rules core never sees them."""

from __future__ import annotations

import itertools
import os
import re
import secrets
import uuid
from collections.abc import Callable, Hashable, Sequence
from datetime import UTC, datetime
from typing import Any, Literal, NamedTuple, TypeVar

from pydantic import BaseModel, ConfigDict, Field
from pydantic_core import from_json, to_json

from shared.games.api import DEFAULT_GAME, Event

from .codec import dump_json

SCHEMA_VERSION = 2
"""Current envelope schema; bump it with an upcaster for the previous one.

2: ``game_created`` names its game (``data.game``); logs of schema 1 are all of the default
game."""

Visibility = Literal["public"] | int


# The head of a decision request's JSON, the same in the model's JSON and the engine's
# hand-written one: its id (``game:version:seat``), game, version and seat, in this order.
_DECISION_HEAD = re.compile(
    rb'\{"request_id":"[^"\\]*","game_id":"([^"\\]*)","version":([0-9]+),"seat":([0-9]+),'
)


class DecisionHead(NamedTuple):
    """Whom a decision request is for, and at which version."""

    game_id: str
    version: int
    seat: int


def decision_head(raw: bytes) -> DecisionHead:
    """The game, version and seat of a decision request's JSON, read from its head without
    parsing its legal commands (most of it): a lobby routes every request of the games its
    sockets follow, and sends each on as the engine wrote it. A head in another form (keys
    in another order, escapes) is read by parsing the document."""
    head = _DECISION_HEAD.match(raw)
    if head is not None:
        return DecisionHead(head[1].decode(), int(head[2]), int(head[3]))
    fields = from_json(raw)
    return DecisionHead(fields["game_id"], fields["version"], fields["seat"])


def new_id() -> str:
    """An id nobody can guess (a command's: one guessed could be sent first, and the real
    command would be taken for its duplicate)."""
    return uuid.uuid4().hex


def command_key(seat: int | None, command_id: str) -> str:
    """The name a command is deduplicated and answered under: its id scoped to its seat.
    Clients choose their command ids, so an id alone could be taken: a player who sent a
    move under the id a bot seat would use next made the engine take the bot's move for a
    duplicate, and the bot seat never moved. Scoped, an id names one seat's command only
    (``-`` stands for the seatless commands the services send, such as ``create_game``)."""
    return f"{'-' if seat is None else seat}/{command_id}"


class _Ids:
    """Ids unique across processes and time, not secret: 64 random bits drawn once per
    process (again in a forked child) and a 64-bit count, 32 hex digits like a UUID's.
    The engine names every event it writes so; ``uuid4`` reads the OS's random source for
    each (3.6% of the engine's CPU). The count is drawn by blocks of 16 (its last hex digit
    free): one block names all the events of a command, its ids the block's 31 digits
    formatted once and each event's own digit (formatting an int was 3,000 to 5,000
    instructions an event); a lone id takes a block of its own."""

    def __init__(self) -> None:
        self.reset()
        os.register_at_fork(after_in_child=self.reset)

    def reset(self) -> None:
        self.process = f"{secrets.randbits(64):016x}"
        self.blocks = itertools.count()

    def __call__(self) -> str:
        return f"{self.process}{next(self.blocks):015x}0"

    def block(self) -> str:
        """The first 31 hex digits of 16 new ids, which :data:`HEX_DIGITS` ends."""
        return f"{self.process}{next(self.blocks):015x}"

    def quoted(self, n: int) -> list[str]:
        """``n`` new ids as JSON strings (hex digits: their own JSON once quoted)."""
        blocks = [self.block() for _ in range(-(-n // 16))]
        return [f'"{b}{d}"' for b in blocks for d in HEX_DIGITS][:n]


HEX_DIGITS = "0123456789abcdef"
_LAST_DIGITS = [f'{d}"' for d in HEX_DIGITS]  # an id's last digit and its closing quote


new_event_id = _Ids()


def utcnow() -> datetime:
    return datetime.now(UTC)


class _Envelope(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


_UNANSWERED = frozenset(("bot", "fallback"))  # the actors whose commands get no stored answer


class CommandEnvelope(_Envelope):
    """A request to change one game. ``type`` and ``payload`` are the rules command (or
    ``create_game`` with its ruleset, options, players and seed)."""

    command_id: str = Field(default_factory=new_id, min_length=1, max_length=64)
    game_id: str = Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_.:-]+$")
    seat: int | None = Field(default=None, ge=0, le=7)
    type: str = Field(min_length=1, max_length=32)
    payload: dict[str, Any] = Field(default_factory=dict)
    actor: Literal["player", "bot", "fallback", "system"] = "player"
    causation_id: str | None = None
    correlation_id: str | None = None
    issued_at: datetime = Field(default_factory=utcnow)
    schema_version: int = SCHEMA_VERSION

    def rules_command(self) -> dict[str, Any]:
        """The command as the rules core parses it."""
        return {**self.payload, "type": self.type, "seat": self.seat}

    @property
    def key(self) -> str:
        """The id the engine deduplicates and answers this command under
        (:func:`command_key`)."""
        return command_key(self.seat, self.command_id)

    @property
    def answered(self) -> bool:
        """Whether the engine stores its answer for its sender to read: not for the bot
        player's (actor ``bot`` or ``fallback``), which reads none (a stale answer is kept
        out by ``send_at``, and the game's next request tells it the rest): a list and its
        expiry written for nobody, two Redis commands, were three in four moves of a 4-seat
        table with one human (issue 24). Its id is deduplicated all the same."""
        return self.actor not in _UNANSWERED


read_command: Callable[[bytes | str], CommandEnvelope] = (
    CommandEnvelope.__pydantic_validator__.validate_json
)
"""A command from its JSON, validated as :meth:`CommandEnvelope.model_validate_json` does
(raising the same :class:`~pydantic.ValidationError`) by the model's validator itself: the
engine reads every command so, and ``model_validate_json``'s Python wrapper cost a sixth of
the parse (about 3,300 of 24,400 instructions)."""


class EventEnvelope(_Envelope):
    """One fact of a game's log, at a gap-free per-game ``version`` (1, 2, 3, ...).

    ``secret`` is server-only: it lives in the game's own log for the engine and is dropped
    by :meth:`redacted` before the event goes anywhere else.
    """

    event_id: str = Field(default_factory=new_id)
    game_id: str
    version: int = Field(ge=1)
    type: str
    data: dict[str, Any]
    secret: dict[str, Any] | None = None
    visibility: Visibility = "public"
    causation_id: str | None = None
    correlation_id: str | None = None
    actor: str | None = None
    recorded_at: datetime = Field(default_factory=utcnow)
    schema_version: int = SCHEMA_VERSION

    def encode(self) -> EncodedEvent:
        """The form the event store writes: public JSON, and the secret apart."""
        return encode_event(
            event_id=self.event_id,
            game_id=self.game_id,
            version=self.version,
            type=self.type,
            data=self.data,
            secret=self.secret,
            visibility=self.visibility,
            causation_id=self.causation_id,
            correlation_id=self.correlation_id,
            actor=self.actor,
            recorded_at=self.recorded_at.isoformat(),
        )

    def redacted(self) -> EventEnvelope:
        return self if self.secret is None else self.model_copy(update={"secret": None})

    def visible_to(self, seat: int | None) -> bool:
        return self.visibility == "public" or (seat is not None and self.visibility == seat)


class EncodedEvent(NamedTuple):
    """An event ready to store: its public JSON, and its server-only part ("" if none)."""

    public: str
    secret: str


def encode_event(
    *,
    event_id: str,
    game_id: str,
    version: int,
    type: str,
    data: dict[str, Any],
    secret: dict[str, Any] | None,
    visibility: Visibility,
    causation_id: str | None,
    correlation_id: str | None,
    actor: str | None,
    recorded_at: str,
) -> EncodedEvent:
    """Encode an :class:`EventEnvelope` without building the model: the engine encodes every
    event it makes, and this is several times cheaper. :func:`read_event` reads it back."""
    made = Made(game_id, causation_id, correlation_id, actor, recorded_at)
    return made.encode([Event(type, data, secret, visibility)], version, [event_id])[0]


class Made(NamedTuple):
    """What the events of one command share (their game, causes, actor and time): encoded
    once per command, as the JSON after each event's own fields."""

    game_id: str
    causation_id: str | None
    correlation_id: str | None
    actor: str | None
    recorded_at: str

    def encode(
        self,
        events: Sequence[Event],
        first_version: int,
        event_ids: Sequence[str] | None = None,
    ) -> list[EncodedEvent]:
        """``events`` as :class:`EventEnvelope` JSON (the model's keys in its order), at
        versions from ``first_version`` on, named by ``event_ids`` (None: new ids of
        :data:`new_event_id`): each event's own fields in one string with the shared
        rest, one JSON encoding of its data."""
        cause = self.causation_id
        causation = "null" if cause is None else string_json(cause)
        correlation = (  # most commands are their own correlation: encoded once
            causation if self.correlation_id == cause else _optional_json(self.correlation_id)
        )
        tail = (
            f'"causation_id":{causation},"correlation_id":{correlation},'
            f'"actor":{_word_json(self.actor)},"recorded_at":{_word_json(self.recorded_at)},'
            f'"schema_version":{SCHEMA_VERSION}}}'
        )
        game = id_json(self.game_id)
        if event_ids is not None:
            start, ids = "", [string_json(i) for i in event_ids]
        elif len(events) <= 16:  # one block of ids: formatted once, each its own last digit
            start, ids = f'"{new_event_id.block()}', _LAST_DIGITS
        else:
            start, ids = "", new_event_id.quoted(len(events))
        # tuple.__new__ in C, not the named tuple's own __new__ (a Python function): one
        # frame less per event.
        return [
            new_tuple(
                EncodedEvent,
                (
                    f'{{"event_id":{start}{event_id},"game_id":{game},"version":{version},'
                    f'"type":{name_json(e.type)},"data":{to_json(e.data).decode()},'
                    f'"secret":null,"visibility":'
                    f"{_PUBLIC if e.visibility == 'public' else dump_json(e.visibility)},{tail}",
                    "" if e.secret is None else dump_json(e.secret),
                ),
            )
            for version, event_id, e in zip(itertools.count(first_version), ids, events)
        ]


# A named tuple made without its Python-level ``__new__`` (``new_tuple(Cls, (a, b))``): the
# engine makes several a command, and that ``__new__`` is a Python frame each.
new_tuple = tuple.__new__


_PUBLIC = '"public"'  # the visibility of most events, as JSON (written in line: no call)


def string_json(text: str) -> str:
    """``text`` as a JSON string. Printable ASCII without a quote or a backslash (ids such
    as ``t-3f2a…``, times, names) is its own JSON: quoted as it is, without the encoder (the
    engine writes several per command); anything else is encoded."""
    if text.isascii() and text.isprintable() and '"' not in text and "\\" not in text:
        return f'"{text}"'
    return dump_json(text)


def _optional_json(text: str | None) -> str:
    return "null" if text is None else string_json(text)


K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class Kept(dict[K, V]):
    """Values of ``make`` kept by their argument, for the engine's per-command look-ups
    (ids', names' and times' JSON, games' partitions, reply words): a hit is a dictionary's
    look-up in C (``lru_cache``'s bookkeeping cost about 1,500 instructions a hit), a miss
    is made by ``make`` and kept; all are dropped past ``bound`` (so values from elsewhere
    cannot grow it without end). ``Kept(make, bound).__getitem__`` stands for ``make``."""

    def __init__(self, make: Callable[[K], V], bound: int) -> None:
        super().__init__()
        self.make, self.bound = make, bound

    def __missing__(self, key: K) -> V:
        if len(self) >= self.bound:
            self.clear()
        found = self[key] = self.make(key)
        return found


id_json: Callable[[str], str] = Kept(string_json, 65_536).__getitem__
"""A game's id as a JSON string (:func:`string_json`), encoded once per game: the engine
writes it three times per command (its events, the append's result, its decision requests)."""

_word_json: Callable[[str | None], str] = Kept(_optional_json, 64).__getitem__
"""An actor's or a batch's time as JSON (or ``null``): a handful of actors, and a batch's
commands share their time, so each is encoded once, not once per command."""

name_json: Callable[[str], str] = Kept(dump_json, 4096).__getitem__
"""An event type's or a decision kind's JSON string: a few dozen names, each encoded once."""


class Rejection(_Envelope):
    """A command the engine refused: nothing was written to the game's log."""

    command_id: str
    game_id: str
    seat: int | None
    code: str
    reason: str
    at: datetime = Field(default_factory=utcnow)


class DeadLetter(_Envelope):
    """A stream entry that kept failing, moved to its partition's dead letters with the
    reason (by ``GroupConsumer.dead_letter``), where an operator finds it whole."""

    stream: str = Field(description="The stream the entry was read from.")
    id: str = Field(description="Its id there.")
    group: str = Field(description="The consumer group that gave up on it.")
    reason: str
    fields: str = Field(description="The entry's fields, as a JSON object.")


class CommandResult(_Envelope):
    """What the sender of a command learns: accepted (with the game's new version),
    a duplicate of an accepted command, or rejected (with the code and reason)."""

    command_id: str
    game_id: str
    status: Literal["accepted", "duplicate", "rejected"]
    seat: int | None = None
    version: int | None = None
    code: str | None = None
    reason: str | None = None


class DecisionRequest(_Envelope):
    """A seat must decide: its legal commands and deadline. Never carries another seat's
    hidden values: ``view``, when there, is the deciding seat's own."""

    request_id: str = Field(default_factory=new_id)
    game_id: str
    version: int
    seat: int
    kind: str
    deadline: datetime
    legal_commands: list[dict[str, Any]]
    correlation_id: str | None = None
    view: dict[str, Any] | None = Field(
        default=None,
        description="The deciding seat's own view at ``version`` (the game's ``view`` for "
        "that seat, without its legal commands, which the request lists): given only in a "
        "bot seat's request on the bot player's stream, so that the bot decides from the "
        "request alone. A greedy seat's (and a leaver's, whose fallback is greedy) is the "
        'part of that view the game\'s greedy policy reads, marked `"part": "policy"` '
        "(the game's `policy_view`; the whole view for a game without one). Absent (an "
        "engine not yet upgraded, a leaver's seat, every request "
        "on the decisions stream the sockets read): the bot player reads the seat's "
        "projected view.",
    )


def read_decision_request(raw: bytes | str) -> DecisionRequest:
    """A :class:`DecisionRequest` from its JSON: parsed into Python values first, then
    validated. ``model_validate_json`` validated a bot seat's ``view`` (5-6 KB of nested
    values) value by value as it parsed it, 30% more CPU for the same model (issue 24: the
    bot player parses one per bot move)."""
    return DecisionRequest.model_validate(from_json(raw))


def _name_the_game(raw: dict[str, Any]) -> dict[str, Any]:
    """Schema 1 to 2: before games had names every log was of the default game (the other
    events did not change)."""
    if raw["type"] != "game_created":
        return raw
    return {**raw, "data": {"game": DEFAULT_GAME, **raw["data"]}}


_SCHEMA_STEPS: dict[int, Callable[[dict[str, Any]], dict[str, Any]]] = {1: _name_the_game}
"""The envelope's own upcasters, by the schema version each starts from: the envelope's
shape, which every game shares. A game's event payloads change shape by their own versions,
which the game upcasts when a log is read (:mod:`shared.games.events`)."""


def load_event(raw: dict[str, Any]) -> EventEnvelope:
    """Parse a stored event, upcasting its envelope step by step to the current schema."""
    version = raw.get("schema_version", 1)
    while version < SCHEMA_VERSION:
        step = _SCHEMA_STEPS.get(version)
        if step is None:
            raise ValueError(f"no upcaster for envelopes of schema version {version}")
        raw = {**step(raw), "schema_version": version + 1}
        version += 1
    return EventEnvelope.model_validate(raw)


_ID_START = b'{"event_id":"'  # how :meth:`Made.encode` begins every stored event


def stored_event_id(public: bytes) -> str:
    """A stored event's id, without reading the rest of it: a consumer checking that the
    log still has the event it holds (a failover can roll a log back) reads that event
    every batch, and validating it whole cost as much as an event applied. An event not
    written in :meth:`Made.encode`'s form (its id first, unescaped) is parsed."""
    if public.startswith(_ID_START):
        end = public.find(b'"', len(_ID_START))
        found = public[len(_ID_START) : end]
        if end > 0 and b"\\" not in found:
            return found.decode()
    event_id: str = from_json(public)["event_id"]
    return event_id


def read_event(public: bytes | str, secret: bytes | str | None = None) -> EventEnvelope:
    """A stored event from its JSON and its server-only part's: an event of the current
    schema without a secret (almost all) is validated straight from the bytes, a third
    faster than parsing them first; any other goes through :func:`load_event`."""
    if secret is None:
        event = EventEnvelope.model_validate_json(public)
        if event.schema_version == SCHEMA_VERSION:
            return event
    raw = from_json(public)
    if secret is not None:
        raw["secret"] = from_json(secret)
    return load_event(raw)
