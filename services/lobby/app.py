"""The public HTTP API: tables, seats, commands and views.

Every error has one JSON shape, ``{"code", "message", "details"}``, with a 4xx status for
anything the caller can fix. A seat is proven by the signed token issued on joining.
"""

from __future__ import annotations

import json
import secrets
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Annotated, Any, Literal

import structlog
from fastapi import Body, Depends, FastAPI, Header, Request, WebSocket, WebSocketDisconnect
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field
from redis.asyncio import Redis
from sqlalchemy import Engine
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, select
from structlog.contextvars import bound_contextvars

from services.ai.bots import BOTS
from shared.bus import CommandSender, Keys
from shared.contracts import CommandEnvelope
from shared.games import age_of_discovery as aod
from shared.httpapi import ERRORS, ApiError, Id, install_error_handlers
from shared.settings import Settings
from shared.views import read_view

from . import tokens
from .db import LobbySeat, LobbyTable, LobbyTicket
from .fanout import EventFanout

log = structlog.get_logger("caravel.lobby")

# Names are shown to other players and stored in SQL: printable text only.
NAME_PATTERN = r"^[^\x00-\x1f\x7f]+$"


# Rule violations the caller caused by timing rather than by the command's content.
CONFLICT_CODES = {"out_of_turn", "game_over", "game_exists"}


class CreateTable(BaseModel):
    model_config = ConfigDict(extra="forbid")

    ruleset: str = Field(
        default="standard", pattern=r"^[A-Za-z0-9_-]{1,64}$", examples=["standard"]
    )
    options: dict[str, str | int] = Field(
        default_factory=dict, examples=[{"tile_set": "extended", "navy_vp_per_ship": 3}]
    )
    seats: int = Field(ge=2, le=5, examples=[4])
    bots: dict[int, str] = Field(
        default_factory=dict,
        description="Seats taken by bots, with their level.",
        examples=[{"2": "greedy", "3": "random"}],
    )
    deadline_s: float = Field(default=60.0, gt=0, le=86400, description="Time for each move.")


class SeatOut(BaseModel):
    seat: int
    kind: str
    name: str
    bot_level: str | None = None
    left: bool = False


class TableOut(BaseModel):
    id: str
    ruleset: str
    options: dict[str, Any]
    seats: int
    status: str
    deadline_s: float
    taken: list[SeatOut]


class JoinTable(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=64, pattern=NAME_PATTERN, examples=["Ana"])
    seat: int | None = Field(default=None, ge=0, le=4, description="A seat; none: the first free.")


class JoinOut(BaseModel):
    table_id: str
    seat: int
    token: str = Field(description="Send it as 'Authorization: Bearer <token>'.")


class StartTable(BaseModel):
    model_config = ConfigDict(extra="forbid")

    fill_with_bots: str | None = Field(
        default=None, description="Give free seats to bots of this level.", examples=["greedy"]
    )


class QueueIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=64, pattern=NAME_PATTERN, examples=["Ana"])
    players: int = Field(ge=2, le=5, examples=[4])
    options: dict[str, str | int] = Field(default_factory=dict, examples=[{"tile_set": "extended"}])


class TicketOut(BaseModel):
    ticket: str
    status: str = Field(examples=["waiting", "matched"])
    table_id: str | None = None
    seat: int | None = None
    token: str | None = Field(default=None, description="Your seat token, once matched.")


class CommandOut(BaseModel):
    status: str = Field(examples=["accepted"])
    version: int | None = Field(examples=[42])
    command_id: str


class LegalOut(BaseModel):
    version: int
    seat: int
    legal_commands: list[dict[str, Any]]


class Lobby:
    """What the routes share: Redis, the key names, the SQL engine and the settings."""

    def __init__(self, redis: Redis, keys: Keys, db: Engine, settings: Settings) -> None:
        self.redis = redis
        self.keys = keys
        self.db = db
        self.settings = settings
        self.key = settings.signing_key()
        self.sender = CommandSender(redis, keys)
        self.fanout = EventFanout(redis, keys)
        self.rulesets: dict[str, aod.Ruleset] = {}

    def rules(self, ruleset: str, options: dict[str, Any]) -> aod.Rules:
        if ruleset not in self.rulesets:
            self.rulesets[ruleset] = aod.load_ruleset(ruleset)
        return aod.compile_rules(self.rulesets[ruleset], options)

    def claim(self, authorization: str | None) -> tokens.SeatClaim:
        if not authorization or not authorization.startswith("Bearer "):
            raise ApiError(401, "missing_token", "send 'Authorization: Bearer <seat token>'")
        try:
            return tokens.verify(self.key, authorization.removeprefix("Bearer ").strip())
        except tokens.TokenError as e:
            raise ApiError(401, e.code, e.message) from None


def get_lobby(request: Request) -> Lobby:
    return request.app.state.lobby  # type: ignore[no-any-return]


LobbyDep = Annotated[Lobby, Depends(get_lobby)]
Auth = Annotated[str | None, Header(description="Bearer <seat token>")]


def _table_out(table: LobbyTable, seats: list[LobbySeat]) -> TableOut:
    return TableOut(
        id=table.id,
        ruleset=table.ruleset,
        options=json.loads(table.options),
        seats=table.seats,
        status=table.status,
        deadline_s=table.deadline_s,
        taken=[
            SeatOut(**s.model_dump(exclude={"table_id"}))
            for s in sorted(seats, key=lambda s: s.seat)
        ],
    )


def create_app(redis: Redis, keys: Keys, db: Engine, settings: Settings) -> FastAPI:
    lobby = Lobby(redis, keys, db, settings)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        yield
        await lobby.fanout.close()

    app = FastAPI(
        title="Caravel",
        version="0.1.0",
        description="Tables, seats, moves and live views of The Age of Discovery.",
        lifespan=lifespan,
    )
    app.state.lobby = lobby
    install_error_handlers(app)
    from services.scoring.http import router as scoring  # it builds on this module's errors

    app.include_router(scoring)

    @app.post("/tables", status_code=201, response_model=TableOut, responses=ERRORS)
    def create_table(body: CreateTable, lobby: LobbyDep) -> TableOut:
        """Open a table: ruleset, edition options, seats and which of them are bots."""
        try:
            rules = lobby.rules(body.ruleset, body.options)
        except aod.RulesetError as e:
            raise ApiError(422, "bad_options", str(e)) from None
        for seat, level in body.bots.items():
            if not 0 <= seat < body.seats:
                raise ApiError(422, "bad_seat", f"seat {seat} is not in a {body.seats}-seat table")
            if level not in BOTS:
                raise ApiError(
                    422, "bad_bot", f"unknown bot level {level!r}", {"known": list(BOTS)}
                )
        table = LobbyTable(
            id=f"t-{uuid.uuid4().hex[:12]}",
            ruleset=body.ruleset,
            options=json.dumps(rules.options),
            seats=body.seats,
            deadline_s=body.deadline_s,
        )
        seats = [
            LobbySeat(table_id=table.id, seat=s, kind="bot", name=f"{level} bot", bot_level=level)
            for s, level in sorted(body.bots.items())
        ]
        with Session(lobby.db) as session:
            session.add(table)
            session.flush()
            session.add_all(seats)
            session.commit()
            session.refresh(table)
            return _table_out(
                table,
                [s for s in session.exec(select(LobbySeat).where(LobbySeat.table_id == table.id))],
            )

    @app.post("/queue", status_code=202, response_model=TicketOut, responses=ERRORS)
    def enter_queue(body: QueueIn, lobby: LobbyDep) -> TicketOut:
        """Wait for a game with these preferences: a table forms when enough players wait,
        or after a while with bots in the free seats, and starts by itself."""
        try:
            rules = lobby.rules("standard", body.options)
        except aod.RulesetError as e:
            raise ApiError(422, "bad_options", str(e)) from None
        ticket = LobbyTicket(
            id=f"q-{uuid.uuid4().hex[:16]}",
            name=body.name,
            players=body.players,
            options=json.dumps(rules.options, sort_keys=True),
        )
        with Session(lobby.db) as session:
            session.add(ticket)
            session.commit()
            return TicketOut(ticket=ticket.id, status="waiting")

    @app.get("/queue/{ticket_id}", response_model=TicketOut, responses=ERRORS)
    def ticket_status(ticket_id: Id, lobby: LobbyDep) -> TicketOut:
        """Poll a ticket; once matched it carries the table, the seat and its token."""
        with Session(lobby.db) as session:
            ticket = session.get(LobbyTicket, ticket_id)
            if ticket is None:
                raise ApiError(404, "unknown_ticket", f"there is no ticket {ticket_id}")
            out = TicketOut(ticket=ticket.id, status=ticket.status)
            if ticket.table_id is not None and ticket.seat is not None:
                out.table_id, out.seat = ticket.table_id, ticket.seat
                out.token = tokens.issue(
                    lobby.key, ticket.table_id, ticket.seat, lobby.settings.seat_token_ttl_s
                )
            return out

    @app.get("/tables", response_model=list[TableOut], responses=ERRORS)
    def list_tables(lobby: LobbyDep, status: Literal["open", "running"] = "open") -> list[TableOut]:
        """Tables by status (``open`` by default), newest first."""
        with Session(lobby.db) as session:
            tables = session.exec(
                select(LobbyTable)
                .where(LobbyTable.status == status)
                .order_by(LobbyTable.created_at.desc())  # type: ignore[attr-defined]
            ).all()
            out = []
            for table in tables[:200]:
                seats = session.exec(select(LobbySeat).where(LobbySeat.table_id == table.id)).all()
                out.append(_table_out(table, list(seats)))
            return out

    @app.get("/tables/{table_id}", response_model=TableOut, responses=ERRORS)
    def get_table(table_id: Id, lobby: LobbyDep) -> TableOut:
        with Session(lobby.db) as session:
            table = _table(session, table_id)
            return _table_out(table, _seats(session, table_id))

    @app.post("/tables/{table_id}/join", status_code=201, response_model=JoinOut, responses=ERRORS)
    def join(table_id: Id, body: JoinTable, lobby: LobbyDep) -> JoinOut:
        """Take a seat (a given one, or the first free): the answer carries the seat token."""
        for _ in range(8):  # lost a race for a seat: try the next free one
            with Session(lobby.db) as session:
                table = _table(session, table_id)
                if table.status != "open":
                    raise ApiError(409, "table_not_open", f"table {table_id} is {table.status}")
                taken = {s.seat for s in _seats(session, table_id)}
                if body.seat is not None:
                    if body.seat >= table.seats:
                        raise ApiError(422, "bad_seat", f"the table has {table.seats} seats")
                    if body.seat in taken:
                        raise ApiError(409, "seat_taken", f"seat {body.seat} is taken")
                    seat = body.seat
                else:
                    free = [s for s in range(table.seats) if s not in taken]
                    if not free:
                        raise ApiError(409, "table_full", f"table {table_id} is full")
                    seat = free[0]
                session.add(LobbySeat(table_id=table_id, seat=seat, kind="human", name=body.name))
                try:
                    session.commit()
                except IntegrityError:
                    session.rollback()
                    if body.seat is not None:
                        raise ApiError(409, "seat_taken", f"seat {seat} is taken") from None
                    continue
            token = tokens.issue(lobby.key, table_id, seat, lobby.settings.seat_token_ttl_s)
            return JoinOut(table_id=table_id, seat=seat, token=token)
        raise ApiError(409, "table_busy", "too many players are joining at once; try again")

    @app.post("/tables/{table_id}/leave", response_model=TableOut, responses=ERRORS)
    async def leave(table_id: Id, lobby: LobbyDep, authorization: Auth = None) -> TableOut:
        """Give a seat up: before the start it frees the seat; in a running game a fallback
        bot plays it from then on (its moves are recorded as the fallback's)."""
        claim = _claim_for(lobby, authorization, table_id)
        table, running = await run_in_threadpool(_leave, lobby.db, table_id, claim.seat)
        if running:
            await lobby.redis.hset(lobby.keys.seats(table_id), str(claim.seat), "left")
            view = await read_view(lobby.redis, lobby.keys, table_id, claim.seat)
            if view is not None and view["legal_commands"]:  # its decision is due now
                member = json.dumps([table_id, view["version"], claim.seat])
                await lobby.redis.zadd(lobby.keys.deadlines(), {member: 0})
        return table

    @app.post("/tables/{table_id}/start", response_model=TableOut, responses=ERRORS)
    async def start(
        table_id: Id, lobby: LobbyDep, body: StartTable | None = None, authorization: Auth = None
    ) -> TableOut:
        """Start the game once every seat is taken (or filled with bots)."""
        _claim_for(lobby, authorization, table_id)
        fill = body.fill_with_bots if body else None
        if fill is not None and fill not in BOTS:
            raise ApiError(422, "bad_bot", f"unknown bot level {fill!r}", {"known": list(BOTS)})
        return await start_table(lobby, table_id, fill)

    @app.post("/games/{game_id}/commands", response_model=CommandOut, responses=ERRORS)
    async def send_command(
        game_id: Id,
        command: Annotated[
            dict[str, Any],
            Body(
                examples=[{"type": "place", "unit": "colonist", "box": "dock"}],
                description="A rules command for your seat: its type and fields "
                "(see your legal commands). An optional command_id makes retries safe.",
            ),
        ],
        lobby: LobbyDep,
        authorization: Auth = None,
    ) -> CommandOut:
        """Play a move for your seat: accepted with the game's new version, or a 4xx with
        the rules' code and reason."""
        claim = _claim_for(lobby, authorization, game_id)
        fields = dict(command)
        kind = fields.pop("type", None)
        command_id = fields.pop("command_id", None) or uuid.uuid4().hex
        fields.pop("seat", None)
        if not isinstance(kind, str) or not isinstance(command_id, str):
            raise ApiError(422, "malformed", "a command has a string 'type' (and 'command_id')")
        try:
            envelope = CommandEnvelope(
                command_id=command_id, game_id=game_id, seat=claim.seat, type=kind, payload=fields
            )
        except ValueError as e:
            raise ApiError(422, "malformed", str(e).splitlines()[0]) from None
        with bound_contextvars(game=game_id, command=command_id, seat=claim.seat):
            result = await _execute(lobby, envelope)
        if result.status == "rejected":
            code = result.code or "rejected"
            status = 404 if code == "unknown_game" else 409 if code in CONFLICT_CODES else 422
            raise ApiError(status, code, result.reason or "", {"command_id": command_id})
        return CommandOut(status=result.status, version=result.version, command_id=command_id)

    @app.get(
        "/games/{game_id}/view",
        responses={
            **ERRORS,
            200: {"content": {"application/json": {"schema": {"type": "object"}}}},
        },
        response_class=JSONResponse,
    )
    async def get_view(game_id: Id, lobby: LobbyDep, authorization: Auth = None) -> JSONResponse:
        """The game as your seat sees it (with a seat token), or as a spectator (without)."""
        seat = _claim_for(lobby, authorization, game_id).seat if authorization else None
        view = await read_view(lobby.redis, lobby.keys, game_id, seat)
        if view is None:
            raise ApiError(404, "unknown_game", f"there is no game {game_id} (yet)")
        return JSONResponse(view)  # already JSON-ready: skip FastAPI's re-encoding

    @app.get("/games/{game_id}/legal", response_model=LegalOut, responses=ERRORS)
    async def get_legal(game_id: Id, lobby: LobbyDep, authorization: Auth = None) -> LegalOut:
        """Your seat's legal commands now (empty when you have nothing to decide)."""
        claim = _claim_for(lobby, authorization, game_id)
        view = await read_view(lobby.redis, lobby.keys, game_id, claim.seat)
        if view is None:
            raise ApiError(404, "unknown_game", f"there is no game {game_id} (yet)")
        return LegalOut(
            version=view["version"], seat=claim.seat, legal_commands=view["legal_commands"]
        )

    @app.websocket("/games/{game_id}/ws")
    async def events(
        websocket: WebSocket, game_id: str, after: int = 0, token: str | None = None
    ) -> None:
        """The events your seat may see (with ?token=; public ones without), from version
        ``after`` + 1 on, then live. Reconnect with the last version you got: nothing is
        missed and nothing comes twice."""
        lobby: Lobby = websocket.app.state.lobby
        seat = None
        if token:
            try:
                seat = _claim_for(lobby, f"Bearer {token}", game_id).seat
            except ApiError as e:
                await websocket.accept()  # then close with a reason the client can read
                await websocket.close(code=4401, reason=e.code)
                return
        await websocket.accept()
        try:
            await stream_events(lobby, game_id, seat, after, websocket.send_text)
            await websocket.close()
        except WebSocketDisconnect:
            return

    return app


async def stream_events(
    lobby: Lobby,
    game_id: str,
    seat: int | None,
    after: int,
    send: Callable[[str], Awaitable[None]],
) -> None:
    """Send a game's events visible to ``seat`` after version ``after``: the log first, then
    what the fan-out delivers (listening starts before the log is read, so there is no gap;
    versions already sent are skipped). Returns after the game's last event."""
    async with lobby.fanout.listen(game_id) as entries:
        sent = after
        for _, fields in await lobby.redis.xrange(lobby.keys.log(game_id), min=f"{after + 1}-0"):
            event = json.loads(fields[b"e"])
            sent = event["version"]
            if _visible(event, seat):
                await send(fields[b"e"].decode())
            if event["type"] == "game_ended":
                return
        while True:
            version, events = await entries.get()
            if version <= sent:
                continue
            for event in json.loads(events):
                if event["version"] > sent and _visible(event, seat):
                    await send(json.dumps(event, separators=(",", ":")))
                sent = max(sent, event["version"])
                if event["type"] == "game_ended":
                    return


def _visible(event: dict[str, Any], seat: int | None) -> bool:
    return event["visibility"] == "public" or (seat is not None and event["visibility"] == seat)


async def start_table(lobby: Lobby, table_id: str, fill: str | None) -> TableOut:
    """Mark a table running (filling free seats with bots if asked), tell the bot player who
    plays each seat, and create the game in the engine."""
    table, seats = await run_in_threadpool(_claim_start, lobby.db, table_id, fill)
    who = {str(s.seat): "human" if s.kind == "human" else f"bot:{s.bot_level}" for s in seats}
    await lobby.redis.hset(
        lobby.keys.seats(table_id), mapping={**who, "deadline_s": table.deadline_s}
    )
    command = CommandEnvelope(
        game_id=table_id,
        type="create_game",
        actor="system",
        payload={
            "ruleset": table.ruleset,
            "options": json.loads(table.options),
            "players": [s.name for s in sorted(seats, key=lambda s: s.seat)],
            "seed": secrets.randbits(48),
        },
    )
    result = await _execute(lobby, command)
    if result.status == "rejected":
        raise ApiError(409, result.code or "rejected", result.reason or "")
    return _table_out(table, seats)


async def _execute(lobby: Lobby, command: CommandEnvelope) -> Any:
    try:
        return await lobby.sender.execute(command, lobby.settings.command_timeout_s)
    except TimeoutError:
        log.warning("the engine did not answer in time", timeout_s=lobby.settings.command_timeout_s)
        raise ApiError(503, "engine_unavailable", "the engine did not answer in time") from None


def _claim_for(lobby: Lobby, authorization: str | None, table_id: str) -> tokens.SeatClaim:
    claim = lobby.claim(authorization)
    if claim.table_id != table_id:
        raise ApiError(403, "wrong_table", "this seat token belongs to another table")
    return claim


def _table(session: Session, table_id: str) -> LobbyTable:
    table = session.get(LobbyTable, table_id)
    if table is None:
        raise ApiError(404, "unknown_table", f"there is no table {table_id}")
    return table


def _seats(session: Session, table_id: str) -> list[LobbySeat]:
    return list(session.exec(select(LobbySeat).where(LobbySeat.table_id == table_id)).all())


def _leave(db: Engine, table_id: str, seat_number: int) -> tuple[TableOut, bool]:
    """Free a seat (open table) or mark it abandoned (running game); says which."""
    with Session(db) as session:
        table = _table(session, table_id)
        seat = session.get(LobbySeat, (table_id, seat_number))
        if seat is None or seat.kind != "human" or seat.left:
            raise ApiError(409, "not_seated", f"seat {seat_number} is not yours any more")
        running = table.status != "open"
        if running:
            seat.left = True
            session.add(seat)
        else:
            session.delete(seat)
        session.commit()
        return _table_out(table, _seats(session, table_id)), running


def _claim_start(db: Engine, table_id: str, fill: str | None) -> tuple[LobbyTable, list[LobbySeat]]:
    """Mark an open, full table as running (once), filling free seats with bots if asked."""
    with Session(db) as session:
        table = _table(session, table_id)
        if table.status != "open":
            raise ApiError(409, "table_not_open", f"table {table_id} is {table.status}")
        seats = _seats(session, table_id)
        taken = {s.seat for s in seats}
        free = [s for s in range(table.seats) if s not in taken]
        if free and fill is None:
            raise ApiError(409, "table_not_full", f"seats {free} are free", {"free": free})
        for s in free:
            session.add(
                LobbySeat(table_id=table_id, seat=s, kind="bot", name=f"{fill} bot", bot_level=fill)
            )
        table.status = "running"
        session.add(table)
        session.commit()
        session.refresh(table)
        return table, _seats(session, table_id)
