"""What the lobby's routers share: the :class:`Lobby` object (one dependency for all of them),
seat claims, the round trip to the engine, and the checks of a game and its options, which
go through the registry so that the lobby knows no game."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from typing import Annotated, Any

import structlog
from fastapi import Depends, Request, Security
from fastapi.concurrency import run_in_threadpool
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError
from redis.asyncio import Redis
from sqlalchemy import Engine
from sqlmodel import Session

from shared.bus import Broker, CommandSender, Keys
from shared.bus.admission import SCRIPTS as SEAT_SCRIPTS
from shared.bus.connection import round_trip
from shared.bus.scripts import Script
from shared.contracts import CommandEnvelope, CommandResult, key_json
from shared.eventstore import Archive, EventStore, PendingDecisions, pending_of
from shared.games import api
from shared.httpapi import ApiError, game_named
from shared.redis_replies import text
from shared.settings import Settings
from shared.views import ViewWaiter

from . import tokens
from .catalog import game_schema, options_schema, ruleset_schema
from .db import LobbySeat
from .fanout import EventFanout

log = structlog.get_logger("caravel.lobby")

# Names are shown to other players and stored in SQL: printable text only.
NAME_PATTERN = r"^[^\x00-\x1f\x7f]+$"
# Bidirectional controls (embeddings, overrides, isolates, marks) would turn the text shown
# after a name around ("Ana\u202e" makes what follows read backwards): a name loses them.
BIDI_CONTROLS = re.compile("[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
COMMAND_ID_TTL_S = 3600  # as long as the engine keeps a command's result
MAX_SEATS = 8  # what a command envelope's seat allows; each game narrows it
# How long a read waits for the views projection to reach a version its client knows (it is
# usually there within milliseconds) before a 503 (or a 202) that says when to come back.
VIEW_WAIT_S = 2.0
NO_HOLDER = "-"  # a cached seat nobody holds (free, a bot's, or left)


def clean_name(name: str) -> str:
    """A player's name without bidirectional controls and the spaces around it (a name of
    nothing else is refused: 422). HTML in a name is kept as typed: clients show it as text."""
    cleaned = BIDI_CONTROLS.sub("", name).strip()
    if not cleaned:
        raise ValueError("a name needs a visible character")
    return cleaned


PlayerName = Annotated[
    str,
    Field(min_length=1, max_length=64, pattern=NAME_PATTERN, examples=["Ana"]),
    AfterValidator(clean_name),
]
"""A player's name as sent to join a table or the queue: cleaned by :func:`clean_name`."""


def bot_name(level: str, seat: int) -> str:
    """A bot's name at a table, distinct from its neighbours': "Greedy bot 2" at seat 1
    (people count seats from 1)."""
    return f"{level.capitalize()} bot {seat + 1}"


class Lobby:
    """What the routes share: Redis, the key names, the SQL engine, the settings, and the
    clients built on them (commands to the engine, the game logs, the live fan-out)."""

    def __init__(self, redis: Redis, keys: Keys, db: Engine, settings: Settings) -> None:
        self.redis = redis
        self.keys = keys
        self.db = db
        self.settings = settings
        self.key = settings.signing_key()
        self.verify = tokens.Verifier(self.key)
        self.sender = CommandSender(redis, keys, Broker(redis, service="lobby"))
        self.store = EventStore(redis, keys, archive=Archive(db))  # archived games too
        self.fanout = EventFanout(redis, keys, linger_ms=settings.fanout_linger_ms)
        self.views = ViewWaiter(redis, keys, service="lobby")

    async def start(self) -> None:
        """Connect the broker commands go out on (the app's start)."""
        await self.sender.broker.connect()

    async def close(self) -> None:
        """Stop the subscribers (the fan-out's, the view waiter's) and the brokers: the app's
        one shutdown path, before the Redis client goes away."""
        try:
            try:
                await self.fanout.close()
            finally:
                await self.views.close()
        finally:
            await self.sender.broker.stop()

    def token(self, table_id: str, seat: int, holder: str) -> str:
        """A seat token for ``holder`` of ``seat``, valid for CARAVEL_SEAT_TOKEN_TTL_S."""
        return tokens.issue(self.key, table_id, seat, holder, self.settings.seat_token_ttl_s)

    async def claim(self, authorization: str | None, table_id: str) -> tokens.SeatClaim:
        """The seat a bearer token proves at ``table_id``: 401 if it is missing, forged or
        expired; 403 if it is another table's, or if its holder no longer holds the seat (they
        left, or someone took it since): a signature alone would outlive the holder."""
        claim = self.verified(authorization, table_id)
        await self.check_holder(claim)
        return claim

    async def claim_pending(
        self, authorization: str | None, game_id: str
    ) -> tuple[tokens.SeatClaim, PendingDecisions | None]:
        """:meth:`claim`, and the game's pending decisions (``EventReader.pending``) read in
        the same round trip as the seat's holder: ``GET /legal`` in one round trip. A seat
        not cached is checked the slow way (:meth:`check_holder`)."""
        claim = self.verified(authorization, game_id)
        seat = ("HGET", self.keys.holders(game_id), str(claim.seat))
        cached, reply = await round_trip(self.redis, [seat, self.store.pending_command(game_id)])
        if cached is None:
            await self.check_holder(claim)
        elif (holder := text(cached)) == NO_HOLDER or holder != claim.holder:
            raise not_seated(claim.seat)
        return claim, pending_of(reply)

    def verified(self, authorization: str | None, table_id: str) -> tokens.SeatClaim:
        """The seat a bearer token claims at ``table_id`` (its holder not checked yet): 401
        if it is missing, forged or expired; 403 if it is another table's."""
        if not authorization or not authorization.startswith("Bearer "):
            raise ApiError(401, "missing_token", "send 'Authorization: Bearer <seat token>'")
        try:
            claim = self.verify(authorization.removeprefix("Bearer ").strip())
        except tokens.TokenError as e:
            raise ApiError(401, e.code, e.message) from None
        if claim.table_id != table_id:
            raise ApiError(403, "wrong_table", "this seat token belongs to another table")
        return claim

    async def check_holder(self, claim: tokens.SeatClaim) -> None:
        """403 ``not_seated`` unless the claim's holder still holds its seat. The holder is
        read from Redis (``Keys.holders``, one round trip, shared by every lobby process);
        only a seat not cached there is read from SQL, in the thread pool, and cached."""
        key = self.keys.holders(claim.table_id)
        field = str(claim.seat)
        cached: Any = await self.redis.hget(key, field)
        if cached is None:
            holder = await run_in_threadpool(self._holder, claim.table_id, claim.seat)
            # HSETNX: a join or leave that wrote the seat meanwhile has the last word.
            async with self.redis.pipeline(transaction=False) as pipe:
                pipe.hsetnx(key, field, NO_HOLDER if holder is None else holder)
                pipe.expire(key, self.settings.seat_token_ttl_s)
                await pipe.execute()
        else:
            holder = cached.decode() if isinstance(cached, bytes) else str(cached)
        if holder is None or holder == NO_HOLDER or holder != claim.holder:
            raise not_seated(claim.seat)

    def seat_call(
        self, claim: tokens.SeatClaim, command: CommandEnvelope | None
    ) -> tuple[Script, list[str], list[Any]]:
        """The script call that checks, in one round trip, what :meth:`check_holder` and
        (with ``command``, one under a client's own id) :meth:`check_reuse` check, for a
        :class:`~shared.bus.scripts.Batch`. Its reply: ``unknown`` (the seat is not cached:
        check both the slow way), ``not_seated``, ``reused``, ``set`` (the id's digest stored
        now: :meth:`forget_digest` if the command goes no further) or ``ok``."""
        holders = self.keys.holders(claim.table_id)
        if command is None:  # the holders key twice: every key in the game's slot
            return SEAT_SCRIPTS["seat"], [holders, holders], [claim.seat, claim.holder, "", 0]
        keys = [holders, self._digest_key(command)]
        return (
            SEAT_SCRIPTS["seat"],
            keys,
            [claim.seat, claim.holder, _digest(command), COMMAND_ID_TTL_S],
        )

    async def forget_digest(self, command: CommandEnvelope) -> None:
        """Drop the digest a refused command's id left (it was not sent: a retry may differ)."""
        await self.redis.delete(self._digest_key(command))

    def _holder(self, table_id: str, seat_number: int) -> str | None:
        """The seat's holder in SQL (None: free, a bot's, or left)."""
        with Session(self.db) as session:
            seat = session.get(LobbySeat, (table_id, seat_number))
        return None if seat is None or seat.left else seat.holder

    async def forget_holder(self, table_id: str, seat: int) -> None:
        """Drop a seat's cached holder before its SQL row changes: if the change's own
        :meth:`set_holder` then fails, the next check reads SQL."""
        await self.redis.hdel(self.keys.holders(table_id), str(seat))

    async def set_holder(self, table_id: str, seat: int, holder: str | None) -> None:
        """Cache a seat's new holder (None: nobody) once its SQL row has changed."""
        key = self.keys.holders(table_id)
        async with self.redis.pipeline(transaction=False) as pipe:
            pipe.hset(key, str(seat), NO_HOLDER if holder is None else holder)
            pipe.expire(key, self.settings.seat_token_ttl_s)
            await pipe.execute()

    async def check_reuse(self, command: CommandEnvelope) -> None:
        """409 ``command_id_reused`` if a client's command id came before with another
        command: a retry must be the same command, else the first one's answer (kept under
        that id) would be taken for this one's."""
        digest = _digest(command)
        key = self._digest_key(command)
        if not await self.redis.set(key, digest, nx=True, ex=COMMAND_ID_TTL_S):
            first = await self.redis.get(key)
            if first is not None and first not in (digest, digest.encode()):
                raise command_id_reused(command)

    def _digest_key(self, command: CommandEnvelope) -> str:
        return f"{self.keys.result(command.game_id, command.seat, command.command_id)}/digest"

    async def execute(self, command: CommandEnvelope) -> CommandResult:
        """Send a command to the engine and wait for its result; 503 if none comes."""
        timeout_s = self.settings.command_timeout_s
        try:
            return await self.sender.execute(command, timeout_s)
        except TimeoutError:
            raise _no_answer(timeout_s) from None

    async def execute_admitted(
        self,
        bucket: tuple[Script, list[str], list[Any]],
        claim: tokens.SeatClaim,
        command: CommandEnvelope,
        checked: CommandEnvelope | None,
        pending: bool = False,
    ) -> tuple[str, Any, CommandResult | None, PendingDecisions | None]:
        """The checks of :meth:`seat_call` (``checked``: a command under its client's own
        id) and the ``bucket``'s token, and when they pass the command sent and answered,
        in one round trip (:meth:`CommandSender.execute_admitted`). Returns the seat's
        verdict (``sent`` when sent), the bucket's wait, the answer (None: not sent,
        nothing written but the token) and, with ``pending``, the game's pending decisions
        read in the same round trip once the answer came (None: not read, or none kept:
        ``EventReader.pending``); 503 if no answer comes."""
        timeout_s = self.settings.command_timeout_s
        seat = self.seat_call(claim, checked)
        then = [self.store.pending_command(command.game_id)] if pending else []
        try:
            reply, result, after = await self.sender.execute_admitted(
                bucket, seat, command, timeout_s, then
            )
        except TimeoutError:
            raise _no_answer(timeout_s) from None
        read = pending_of(after[0]) if after and not isinstance(after[0], Exception) else None
        return text(reply[0]), text(reply[1]), result, read


def _no_answer(timeout_s: float) -> ApiError:
    """The 503 of a command the engine did not answer in time (logged)."""
    log.warning("the engine did not answer in time", timeout_s=timeout_s)
    return ApiError(503, "engine_unavailable", "the engine did not answer in time")


def not_seated(seat: int) -> ApiError:
    """The 403 of a token whose holder no longer holds its seat."""
    return ApiError(403, "not_seated", f"this token no longer holds seat {seat}; join again")


def command_id_reused(command: CommandEnvelope) -> ApiError:
    """The 409 of a client's command id that came before with another command."""
    message = f"command_id {command.command_id!r} was sent with another command"
    return ApiError(409, "command_id_reused", message)


def _digest(command: CommandEnvelope) -> str:
    """What a retry under the same command id must repeat: its seat, type and payload."""
    seen = [command.seat, command.type, command.payload]
    return hashlib.sha256(key_json(seen).encode()).hexdigest()


async def get_lobby(request: Request) -> Lobby:
    """The app's lobby. Dependencies are ``async``: FastAPI runs a plain ``def`` one in its
    thread pool, a thread hop on every request for a lookup."""
    return request.app.state.lobby  # type: ignore[no-any-return]


LobbyDep = Annotated[Lobby, Depends(get_lobby)]

SEAT_TOKEN = HTTPBearer(
    scheme_name="seatToken",
    description="The seat token that joining a table (or a matched queue ticket) gives.",
    auto_error=False,  # Lobby.claim says what is wrong, in the API's error shape
)


async def authorization(
    request: Request,
    _: Annotated[HTTPAuthorizationCredentials | None, Security(SEAT_TOKEN)],
) -> str | None:
    """The request's Authorization header as sent, for :meth:`Lobby.claim`; the security
    dependency only documents it (a ``seatToken`` bearer scheme in OpenAPI)."""
    return request.headers.get("authorization")


Auth = Annotated[str | None, Depends(authorization)]


# --- a game and its options, checked through the registry -------------------------------


def chosen_options(game: api.AnyGame, ruleset: str, options: Mapping[str, Any]) -> dict[str, Any]:
    """``options`` of ``ruleset`` as the game resolves them (defaults filled in), checked
    by compiling the rules; ``bad_options`` naming what is wrong otherwise: a 422, or a 409
    when they are another game's options (the document offers every game's: they fit it,
    not the game chosen)."""
    try:
        game.rules(ruleset, options)
        chosen = game.options_model(ruleset).model_validate(options)
    except (api.RulesetError, ValidationError) as e:
        other = options and ruleset in game.rulesets() and _options_of_another_game(game, options)
        status = 409 if other else 422
        raise ApiError(status, "bad_options", str(e)) from None
    return chosen.model_dump(mode="json")


def _options_of_another_game(game: api.AnyGame, options: Mapping[str, Any]) -> bool:
    for name in api.names():
        other = api.get(name)
        if other is game:
            continue
        try:
            other.rules(other.default_ruleset, options)
        except (api.RulesetError, ValidationError):
            continue
        return True
    return False


def check_players(game: api.AnyGame, players: int) -> None:
    """422 ``bad_player_count`` unless the game is played by that many."""
    if not game.min_players <= players <= game.max_players:
        raise ApiError(
            422,
            "bad_player_count",
            f"{game.title} is played by {game.min_players} to {game.max_players}, not {players}",
            {"min": game.min_players, "max": game.max_players},
        )


def check_bot_level(game: api.AnyGame, level: str) -> None:
    """422 ``bad_bot`` unless a bot of ``level`` can play the game."""
    known = api.bot_levels(game)
    if level not in known:
        raise ApiError(422, "bad_bot", f"unknown bot level {level!r}", {"known": known})


class GameChoice(BaseModel):
    """The game a table (or a queued player) is for: its ruleset and edition options."""

    model_config = ConfigDict(extra="forbid")

    game: str = Field(
        default=api.DEFAULT_GAME,
        max_length=64,
        description="A game of GET /games.",
        examples=[api.DEFAULT_GAME],
        json_schema_extra=game_schema(),
    )
    ruleset: str | None = Field(
        default=None,
        pattern=r"^[A-Za-z0-9_-]{1,64}$",
        description="One of the game's rulesets; none: its default.",
        examples=["standard"],
        json_schema_extra=ruleset_schema(),
    )
    options: dict[str, str | int] = Field(
        default_factory=dict,
        description="Edition options of the game's ruleset; unset ones take their default.",
        examples=[{"tile_set": "extended", "navy_vp_per_ship": 3}],
        json_schema_extra=options_schema(),
    )

    def resolve(self) -> tuple[api.AnyGame, str, dict[str, Any]]:
        """The game, the ruleset and the options with defaults filled in; a 422 naming
        what is wrong otherwise."""
        game = game_named(self.game)
        ruleset = self.ruleset or game.default_ruleset
        return game, ruleset, chosen_options(game, ruleset, self.options)
