"""Tables: open one for a game, take and give up seats, and start the game in the engine."""

from __future__ import annotations

import secrets
import time
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any, Literal, NamedTuple, TypeVar

import structlog
from fastapi import APIRouter, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from sqlalchemy import (
    ColumnElement,
    Connection,
    Engine,
    Result,
    Select,
    and_,
    bindparam,
    delete,
    func,
    insert,
    select,
    update,
)
from sqlalchemy.exc import IntegrityError

from shared.bus.deadlines import due_now
from shared.bus.faults import transient
from shared.bus.seat_changes import seat_changed
from shared.contracts import CommandEnvelope, CommandResult, Seats, key_json
from shared.contracts.records import BOT_PREFIX, HUMAN, LEFT
from shared.games import api
from shared.httpapi import ERRORS, ApiError, Id

from . import lean
from .catalog import (
    bot_level_schema,
    bots_schema,
    bots_within_seats,
    game_schema,
    nullable,
    players_schema,
    seat_schema,
)
from .db import SEATS, TABLES, LobbySeat, LobbyTable
from .idempotency import holder_of, keyed_table_id
from .limits import client_of
from .lobby import (
    MAX_SEATS,
    VIEW_WAIT_S,
    Auth,
    GameChoice,
    Lobby,
    LobbyDep,
    PlayerName,
    bot_name,
    check_bot_level,
    check_players,
)

router = APIRouter(tags=["tables"])
log = structlog.get_logger("caravel.tables")

M = TypeVar("M", bound=BaseModel)
RECONCILE_BATCH = 100  # unfinished starts seen through per round, at most
LOST_CHECK_PAGE = 500  # running tables whose game is looked for per round, at most


class CreateTable(GameChoice):
    model_config = ConfigDict(json_schema_extra=bots_within_seats())

    seats: int = Field(ge=1, le=MAX_SEATS, examples=[4], json_schema_extra=players_schema())
    bots: dict[int, str] = Field(
        default_factory=dict,
        description="Seats taken by bots, with their level (see the game's bot levels). "
        "A table of bots only starts at once.",
        examples=[{"2": "greedy", "3": "random"}],
        json_schema_extra=bots_schema(),
    )
    deadline_s: float = Field(default=60.0, gt=0, le=86400, description="Time for each move.")


class SeatOut(BaseModel):
    seat: int
    kind: Literal["human", "bot"]
    name: str
    bot_level: str | None = Field(default=None, json_schema_extra=nullable(bot_level_schema()))
    left: bool = False


class TableOut(BaseModel):
    id: str
    game: str = Field(json_schema_extra=game_schema())
    ruleset: str
    options: dict[str, Any]
    seats: int
    status: Literal["open", "running", "finished"] = Field(
        description="finished: its game is over."
    )
    deadline_s: float
    taken: list[SeatOut]
    start_error: str | None = Field(
        default=None,
        description="Why the last start of this table failed (it is open again: start it "
        "again); none if it did not.",
    )


class JoinTable(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: PlayerName
    seat: int | None = Field(
        default=None,
        ge=0,
        lt=MAX_SEATS,
        description="A seat; none: the first free.",
        json_schema_extra=seat_schema(),
    )


class JoinOut(BaseModel):
    table_id: str
    seat: int
    token: str = Field(description="Send it as 'Authorization: Bearer <token>'.")


class StartTable(BaseModel):
    model_config = ConfigDict(extra="forbid")

    fill_with_bots: str | None = Field(
        default=None,
        description="Give free seats to bots of this level.",
        examples=["greedy"],
        json_schema_extra=nullable(bot_level_schema()),
    )


STARTING: dict[int | str, dict[str, Any]] = {
    202: {
        "model": TableOut,
        "description": "Started, but its game is not readable yet: GET the Location (the "
        "game's view) after Retry-After seconds.",
    }
}


@router.post("/tables", status_code=201, response_model=TableOut, responses={**ERRORS, **STARTING})
async def create_table(
    body: CreateTable, lobby: LobbyDep, request: Request
) -> TableOut | JSONResponse:
    """Open a table: game, ruleset, edition options, seats and which of them are bots. A
    table of bots only starts at once (no one would hold a token to start it). A create
    sent with an ``Idempotency-Key`` names its table from the key: its repeat, whose first
    answer was lost, answers the table the first one made."""
    key = request.headers.get("idempotency-key")
    table_id = f"t-{uuid.uuid4().hex[:12]}"
    if key is not None:
        table_id = keyed_table_id(key.encode("latin-1"), client_of(request.scope), lobby.key)
    table = await run_in_threadpool(_create, lobby.db, body, table_id, key is not None)
    if len(table.taken) == table.seats:
        started = await start_table(lobby, table.id, None, repeat=key is not None)
        return await _readable(lobby, started)
    return table


@lean.lean(create_table)
async def _lean_create(request: Request) -> Response | None:
    """:func:`create_table` of a plainly valid request (:mod:`.lean`), else None."""
    body = await _lean_body(request, CreateTable)
    if body is None:
        return None
    return _lean_answer(await create_table(body, request.app.state.lobby, request), 201)


def _create(db: Engine, body: CreateTable, table_id: str, keyed: bool) -> TableOut:
    """The table made in SQL; a ``keyed`` create whose table exists already is the repeat
    of one whose answer was lost: that table, if the request is the same."""
    asked = table, seats = _made(body, table_id)
    try:
        with db.begin() as connection:  # one transaction; the answer is what was written
            connection.execute(_ADD_TABLE, table.model_dump())
            if seats:
                connection.execute(_ADD_SEAT, [s.model_dump() for s in seats])
    except IntegrityError:
        if not keyed:
            raise
        with db.begin() as connection:
            table, taken = _read(connection, table_id)
        if _asked(table, taken) != _asked(*asked):
            message = "this Idempotency-Key came with another request"
            raise ApiError(422, "idempotency_key_reused", message) from None
        return table_out(table, taken)
    return table_out(table, seats)


def _made(body: CreateTable, table_id: str) -> tuple[LobbyTable, list[LobbySeat]]:
    """The table ``body`` asks for and its bots' seats, checked (422 for a bad one)."""
    game, ruleset, options = body.resolve()
    check_players(game, body.seats)
    for seat, level in body.bots.items():
        if not 0 <= seat < body.seats:
            raise ApiError(422, "bad_seat", f"seat {seat} is not in a {body.seats}-seat table")
        check_bot_level(game, level)
    table = LobbyTable.model_construct(  # checked above: not validated again (issue 24)
        id=table_id,
        game=game.name,
        ruleset=ruleset,
        options=options,
        seats=body.seats,
        deadline_s=body.deadline_s,
    )
    seats = [
        LobbySeat.model_construct(
            table_id=table.id, seat=s, kind="bot", name=bot_name(level, s), bot_level=level
        )
        for s, level in sorted(body.bots.items())
    ]
    return table, seats


def _asked(table: LobbyTable, seats: list[LobbySeat]) -> tuple[Any, ...]:
    """What a create asked for, as a table made by it shows it (whatever happened since)."""
    bots = [(s.seat, s.bot_level) for s in seats if s.kind == "bot"]
    return table.game, table.ruleset, table.options, table.seats, table.deadline_s, bots


@router.get("/tables", response_model=list[TableOut], responses=ERRORS)
async def list_tables(
    lobby: LobbyDep, status: Literal["open", "running", "finished"] = "open"
) -> list[TableOut]:
    """Tables by status (``open`` by default), newest first, at most 200."""
    if status != "open":
        await mark_finished(lobby, await run_in_threadpool(_running, lobby.db))
    return await run_in_threadpool(_list, lobby.db, status)


@router.get("/tables/{table_id}", response_model=TableOut, responses=ERRORS)
async def get_table(table_id: Id, lobby: LobbyDep) -> TableOut:
    await mark_finished(lobby, [table_id])
    return await run_in_threadpool(_get, lobby.db, table_id)


async def mark_finished(lobby: Lobby, table_ids: list[str]) -> None:
    """Mark ``finished`` those of ``table_ids`` whose game is over. The engine records every
    finished game in its partition's set (``Keys.finished``; an archived one in
    ``Keys.archived``), so the lobby checks those sets when tables are read: it needs no loop
    of its own and imports no other service."""
    if not table_ids:
        return
    over = await lobby.store.over(table_ids)
    if over:
        await run_in_threadpool(_set_finished, lobby.db, over)


def _running(db: Engine) -> list[str]:
    with db.connect() as connection:
        query = select(TABLES.c.id).where(TABLES.c.status == "running")
        return list(connection.execute(query).scalars())


def _set_finished(db: Engine, table_ids: list[str]) -> None:
    with db.begin() as connection:
        connection.execute(
            update(TABLES).where(TABLES.c.id.in_(table_ids)).values(status="finished")
        )


def _list(db: Engine, status: str) -> list[TableOut]:
    with db.connect() as connection:
        tables = _tables(connection, TABLES.c.status == status, newest_first=True, limit=200)
    return [table_out(table, seats) for table, seats in tables]


def _get(db: Engine, table_id: str) -> TableOut:
    with db.connect() as connection:
        return table_out(*_read(connection, table_id))


@router.post(
    "/tables/{table_id}/join",
    status_code=201,
    response_model=JoinOut,
    responses=ERRORS,
    name="join_table",
)
async def join(table_id: Id, body: JoinTable, lobby: LobbyDep, request: Request) -> JoinOut:
    """Take a seat (a given one, or the first free): the answer carries the seat token.
    A join sent with an ``Idempotency-Key`` whose seat is taken already answers that seat:
    it is the repeat of a join whose answer was lost."""
    key = request.headers.get("idempotency-key")
    keyed = None
    if key is not None:
        keyed = holder_of(key.encode("latin-1"), client_of(request.scope), table_id, lobby.key)
    seat, holder = await run_in_threadpool(_join, lobby.db, table_id, body, keyed)
    try:
        await lobby.set_holder(table_id, seat, holder)
    except Exception:  # the seat is given back, so the client's retry (of a 503) gets it
        await run_in_threadpool(_unjoin, lobby.db, table_id, seat, holder)
        raise
    return JoinOut(table_id=table_id, seat=seat, token=lobby.token(table_id, seat, holder))


@lean.lean(join)
async def _lean_join(request: Request) -> Response | None:
    """:func:`join` of a plainly valid request (:mod:`.lean`), else None."""
    table_id = lean.path_id(request, "table_id")
    body = await _lean_body(request, JoinTable)
    if table_id is None or body is None:
        return None
    return _lean_answer(await join(table_id, body, request.app.state.lobby, request), 201)


def _join(db: Engine, table_id: str, body: JoinTable, keyed: str | None) -> tuple[int, str]:
    """The seat taken in SQL and its new holder's id (``keyed``: the holder of a keyed
    join, :func:`~.idempotency.holder_of`, whose seat, if taken already, is answered)."""
    for _ in range(8):  # lost a race for a seat: try the next free one
        holder = keyed or uuid.uuid4().hex
        try:
            with db.begin() as connection:  # one read, one insert, one commit
                table, taken = _read(connection, table_id)
                mine = next((s for s in taken if keyed and s.holder == keyed), None)
                if mine is not None:  # the repeat of a join whose answer was lost
                    return mine.seat, holder
                if table.status != "open":
                    raise ApiError(409, "table_not_open", f"table {table_id} is {table.status}")
                if any(s.kind == "human" and s.name == body.name for s in taken):
                    message = f"{body.name!r} already holds a seat at table {table_id}"
                    raise ApiError(409, "name_taken", message)
                seat = _free_seat(table, taken, body.seat)
                human = LobbySeat.model_construct(
                    table_id=table_id, seat=seat, kind="human", name=body.name, holder=holder
                )
                connection.execute(_ADD_SEAT, human.model_dump())
        except IntegrityError:  # lost a race for the seat, or for the name: look again
            continue
        return seat, holder
    raise ApiError(409, "table_busy", "too many players are joining at once; try again")


def _unjoin(db: Engine, table_id: str, seat: int, holder: str) -> None:
    """Give back a seat just taken whose join failed after all (its holder not cached: a
    NOREPLICAS; the seat stayed taken, and the retry was refused ``name_taken``)."""
    with db.begin() as connection:
        connection.execute(delete(SEATS).where(_seat(table_id, seat), SEATS.c.holder == holder))


@router.post(
    "/tables/{table_id}/leave", response_model=TableOut, responses=ERRORS, name="leave_table"
)
async def leave(table_id: Id, lobby: LobbyDep, authorization: Auth = None) -> TableOut:
    """Give a seat up: before the start it frees the seat; in a running game a fallback
    bot plays it from then on (its moves are recorded as the fallback's)."""
    claim = await lobby.claim(authorization, table_id)
    await lobby.forget_holder(table_id, claim.seat)
    table, running = await run_in_threadpool(_leave, lobby.db, table_id, claim.seat)
    await lobby.set_holder(table_id, claim.seat, None)
    if running:
        left: Any = Seats(players={claim.seat: LEFT}).to_mapping()
        async with lobby.redis.pipeline(transaction=False) as pipe:  # the bot players' books
            pipe.hset(lobby.keys.seats(table_id), mapping=left)  # read the seat again
            await seat_changed(lobby.sender.broker, pipe, lobby.keys, table_id, claim.seat)
            await pipe.execute()
        view = await lobby.views.read(table_id, claim.seat, VIEW_WAIT_S)
        if view is not None and view["legal_commands"]:  # its decision is due now
            member = key_json([table_id, view["version"], claim.seat])
            deadlines = lobby.keys.deadlines(lobby.keys.partition(table_id))
            await due_now(lobby.redis, deadlines, member)  # the bot players woken
    return table


@router.post(
    "/tables/{table_id}/start",
    response_model=TableOut,
    responses={**ERRORS, **STARTING},
    name="start_table",
)
async def start(
    table_id: Id,
    lobby: LobbyDep,
    request: Request,
    body: StartTable | None = None,
    authorization: Auth = None,
) -> TableOut | JSONResponse:
    """Start the game once every seat is taken (or filled with bots). It answers once the
    game can be read (GET /games/{id}/view and /legal), or 202 if that takes too long.
    A start sent with an ``Idempotency-Key`` of a table already running answers the table:
    it is the repeat of a start whose answer was lost (a 5xx answer is not kept)."""
    await lobby.claim(authorization, table_id)
    repeat = "idempotency-key" in request.headers
    table = await start_table(lobby, table_id, body.fill_with_bots if body else None, repeat)
    return await _readable(lobby, table)


@lean.lean(start)
async def _lean_start(request: Request) -> Response | None:
    """:func:`start` of a plainly valid request (:mod:`.lean`): no body (the start's
    default), or a JSON object of :class:`StartTable`; else None."""
    table_id = lean.path_id(request, "table_id")
    headers = request.headers
    if headers.get("content-length", "0") == "0" and "transfer-encoding" not in headers:
        body = None  # FastAPI reads no body as None too
    elif (body := await _lean_body(request, StartTable)) is None:
        return None
    if table_id is None:
        return None
    lobby: Lobby = request.app.state.lobby
    authorization = headers.get("authorization")
    return _lean_answer(await start(table_id, lobby, request, body, authorization), 200)


async def _lean_body(request: Request, model: type[M]) -> M | None:
    """The request's body as a valid ``model`` (None: anything else, for FastAPI's handler
    to read and answer, its errors in its shape)."""
    body = await lean.json_object(request)
    if body is None:
        return None
    try:
        return model.model_validate(body)
    except ValidationError:
        return None


def _lean_answer(answer: BaseModel | Response, status: int) -> Response:
    """An endpoint's answer as FastAPI gives it: a response as it is, a model (the route's
    response model) as its JSON with the route's status."""
    if isinstance(answer, Response):
        return answer
    return Response(answer.model_dump_json(), status, media_type="application/json")


async def _readable(lobby: Lobby, table: TableOut) -> TableOut | JSONResponse:
    """``table`` once its game's first view is written (the engine has created the game,
    the views projection follows a little later); after ``VIEW_WAIT_S``, a 202 saying
    where to wait and when to come back. The views are asked for this once: a table whose
    players follow it on their sockets is not projected at every move."""
    if await lobby.views.read_at(table.id, None, 1, VIEW_WAIT_S, keep=False) is not None:
        return table  # the route's status: 200 (started) or 201 (a table of bots)
    headers = {"Location": f"/games/{table.id}/view", "Retry-After": "1"}
    return JSONResponse(table.model_dump(mode="json"), 202, headers=headers)


async def start_table(
    lobby: Lobby, table_id: str, fill: str | None, repeat: bool = False
) -> TableOut:
    """Mark a table running (filling free seats with bots if asked), then create its game
    (:func:`launch`). Until the game is seen to exist the start is unfinished: a start that
    failed on the way (Redis refused, the engine did not answer, this process died) may be
    sent again by anyone who may start the table, and :func:`reconcile_starts` sends it
    again by itself; the engine applies it once. A start the engine refuses reopens the
    table, with the reason. A ``repeat`` (a start sent with an Idempotency-Key) of a table
    whose start is done answers the table as it is."""
    table, seats, filled = await run_in_threadpool(_claim_start, lobby.db, table_id, fill, repeat)
    if table.status == "running" and table.starting_since is None:
        return table_out(table, seats)  # started already: the repeat of a lost answer
    result = await launch(lobby, table, seats)
    if result.status == "rejected" and result.code != "game_exists":  # exists: it started
        reason = f"{result.code}: {result.reason}"
        await run_in_threadpool(_reopen, lobby.db, table_id, filled, reason)
        raise ApiError(409, result.code or "rejected", result.reason or "")
    await run_in_threadpool(_started, lobby.db, [table_id])
    return table_out(table, seats)


def start_command(table: LobbyTable, seats: list[LobbySeat]) -> CommandEnvelope:
    """The command that creates a table's game. Its id is the table's, so that the engine
    applies it once however often it is sent (by a start, then by the reconciler)."""
    return CommandEnvelope(
        command_id=f"start-{table.id}",
        game_id=table.id,
        type="create_game",
        actor="system",
        payload={
            "game": table.game,
            "ruleset": table.ruleset,
            "options": table.options,
            "players": [s.name for s in seats],
            "seed": secrets.randbits(48),
        },
    )


async def launch(lobby: Lobby, table: LobbyTable, seats: list[LobbySeat]) -> CommandResult:
    """Tell the bot player who plays each seat, and create the game in the engine."""
    await _write_seats(lobby, table, seats)
    return await lobby.execute(start_command(table, seats))


async def _write_seats(lobby: Lobby, table: LobbyTable, seats: list[LobbySeat]) -> None:
    """Who plays each seat (a human, or a bot of a level), for the engine and the bots."""
    players = {s.seat: _player(s) for s in seats}
    who = Seats(players=players, deadline_s=table.deadline_s)
    await lobby.redis.hset(lobby.keys.seats(table.id), mapping=who.to_mapping())  # type: ignore[arg-type]


def _player(seat: LobbySeat) -> str:
    """Who plays a seat, as the seats hash says it: a seat its human left is the fallback
    bot's (a start sent again after the leave, say, keeps it so)."""
    if seat.left:
        return LEFT
    return HUMAN if seat.kind == "human" else f"{BOT_PREFIX}{seat.bot_level}"


class Reconciled(NamedTuple):
    """What :func:`reconcile_starts` did: the tables whose start it sent again, and in how
    many seconds a start left unfinished can next be due (0: at the next round)."""

    sent: list[str]
    due_in_s: float


async def reconcile_starts(lobby: Lobby) -> Reconciled:
    """See through the starts left unfinished ``CARAVEL_START_RETRY_S`` ago: a game that
    exists marks its start done; a start the engine refused reopens its table with the
    reason; any other is sent again (the engine applies it once). Each table alone: one
    that fails is tried again next time, and the others go on. Also says when the next
    unfinished start is due: the earliest begun since is due a retry period after it
    began, and any start begun from now on a whole period from now (the matchmaker looks
    again then, not every second: that SQL was most of an idle lobby's CPU)."""
    retry_s = lobby.settings.start_retry_s
    before = datetime.now(UTC) - timedelta(seconds=retry_s)
    found, earliest = await run_in_threadpool(_unfinished_starts, lobby.db, before)
    sent, failed = [], False
    for table, seats in found:
        try:
            if await _see_through(lobby, table, seats):
                sent.append(table.id)
        except Exception:
            failed = True
            log.exception("a start could not be seen through", table_id=table.id)
    if failed or len(found) >= RECONCILE_BATCH:
        return Reconciled(sent, 0.0)
    if earliest is None:
        return Reconciled(sent, retry_s)
    return Reconciled(sent, max(0.0, (_aware(earliest) - before).total_seconds()))


def _aware(moment: datetime) -> datetime:
    """A time read from SQL, in UTC (a database that keeps no zone gives it naive)."""
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


async def _see_through(lobby: Lobby, table: LobbyTable, seats: list[LobbySeat]) -> bool:
    """Finish one unfinished start; whether it was sent again."""
    if await lobby.store.exists(table.id):
        await run_in_threadpool(_started, lobby.db, [table.id])
        return False
    command = start_command(table, seats)
    result = await lobby.sender.result(table.id, command.command_id, seat=None)
    if result is not None and result.status == "rejected":
        reason = f"{result.code}: {result.reason}"
        await run_in_threadpool(_reopen, lobby.db, table.id, [], reason)
        return False
    log.warning("a table's start is sent again: its game does not exist", table_id=table.id)
    await _write_seats(lobby, table, seats)
    await lobby.sender.send(command)
    await run_in_threadpool(_retried, lobby.db, table.id)
    return True


class LostGames:
    """Running tables whose game is gone: started (their start seen through, the game seen
    to exist), but Redis no longer holds the game, nor does the archive (a finished game's
    log moves there: such a game is not lost). Redis loses acknowledged writes when it
    crashes without an append-only file (``caravel up``'s embedded Redis of before
    ``CARAVEL_EMBEDDED_FSYNC``), with ``appendfsync everysec``, when a failover promotes a
    replica that lacked them, or when it is started on another, empty, folder: a table
    started since the last write kept has nothing left in Redis, and its players would
    wait at a table that never moves.

    Such a table's game is started again, as new: its start is marked unfinished again
    (``starting_since``, as a start that failed on the way) and sent again by
    :func:`_see_through`, the engine's record of the first start (``start-{table}``) being
    lost with the rest; from there it is an unfinished start like any other
    (:func:`reconcile_starts`: sent again until the game exists; reopened with the reason
    in ``start_error`` if the engine refuses it). The players find the game at its first
    move, a new deal (the readers take it as a log that went back); what was played
    before is gone with Redis' copy, and a warning is logged for each table.

    A table just started whose game the engine has not created yet is an unfinished start
    (``starting_since`` set), never looked at here. A game not known now (its shard
    answered with a fault) is not taken for lost: it is looked at again at the next pass.
    Cost: one lobby looks through the running tables at most every
    ``CARAVEL_LOST_GAME_CHECK_S``, ``LOST_CHECK_PAGE`` of them at each of the matchmaker's
    reconciling rounds (every ``RECONCILE_S``): per page, one SQL query of their ids and
    one pipelined round trip to Redis, of a command a partition
    (:meth:`~shared.eventstore.EventReader.existing`; one more round trip, and a query of
    the archive, only where some game is missing); a table is looked at once a pass, and
    one lobby process makes a pass a period (the first that takes
    :meth:`~shared.bus.Keys.lost_games_pass`)."""

    def __init__(self, lobby: Lobby) -> None:
        self.lobby = lobby
        self._after: str | None = None  # the last table of the pass looked at; None: no pass
        self._next_pass = 0.0  # when the next pass may begin (time.monotonic)

    async def round(self) -> list[str]:
        """Look at the next page of running tables (beginning a pass if one is due); returns
        the tables whose game was started again. Each table alone: one that fails is looked
        at again at the next pass, and the others go on."""
        if self._after is None:
            now = time.monotonic()
            if now < self._next_pass:
                return []
            period_s = self.lobby.settings.lost_game_check_s
            self._next_pass = now + period_s
            if not await self._take_pass(period_s):
                return []
            self._after = ""
        page = await run_in_threadpool(_started_tables, self.lobby.db, self._after)
        self._after = page[-1] if len(page) == LOST_CHECK_PAGE else None
        found = await self.lobby.store.existing(page)
        lost = [table_id for table_id, there in found.items() if there is False]
        if not lost:
            return []
        sent = []
        for table, seats in await run_in_threadpool(_unfinish, self.lobby.db, lost):
            try:
                log.warning("a running table's game is gone: started again", table_id=table.id)
                if await _see_through(self.lobby, table, seats):
                    sent.append(table.id)
            except Exception:
                log.exception("a lost game could not be started again", table_id=table.id)
        return sent

    async def _take_pass(self, period_s: float) -> bool:
        """Whether this process makes the pass now due: not if another lobby process began
        one less than ``period_s`` ago (:meth:`Keys.lost_games_pass`). A shard that refuses
        the key does not stop the pass (a fault is logged)."""
        key = self.lobby.keys.lost_games_pass()
        try:
            return bool(
                await self.lobby.redis.set(key, "1", nx=True, px=max(1, int(period_s * 1000)))
            )
        except Exception as error:  # a closed connection's AttributeError among them
            if not transient(error):
                raise
            log.warning("lost games' pass key refused; looking without it", error=repr(error))
            return True


def table_out(table: LobbyTable, seats: list[LobbySeat]) -> TableOut:
    return TableOut(
        id=table.id,
        game=table.game,
        ruleset=table.ruleset,
        options=table.options,
        seats=table.seats,
        status=table.status,
        deadline_s=table.deadline_s,
        taken=[SeatOut(**s.model_dump(exclude={"table_id"})) for s in seats],
        start_error=table.start_error or None,
    )


def _read(connection: Connection, table_id: str) -> tuple[LobbyTable, list[LobbySeat]]:
    """A table and its taken seats in seat order; 404 for no table."""
    for found in _found(connection.execute(_BY_ID, {"table_id": table_id})):
        return found
    raise ApiError(404, "unknown_table", f"there is no table {table_id}")


def _tables(
    connection: Connection,
    where: ColumnElement[bool],
    newest_first: bool = False,
    limit: int | None = None,
) -> list[tuple[LobbyTable, list[LobbySeat]]]:
    """The tables ``where`` holds (the newest first, or in no given order; ``limit`` at
    most), each with its taken seats in seat order: one statement, the seats joined to
    their tables."""
    return _found(connection.execute(_query(where, newest_first, limit)))


def _query(
    where: ColumnElement[bool], newest_first: bool = False, limit: int | None = None
) -> Select[Any]:
    """The statement of :func:`_tables`."""
    chosen = TABLES.select().where(where)
    if newest_first:
        chosen = chosen.order_by(TABLES.c.created_at.desc())
    if limit is not None:
        chosen = chosen.limit(limit)
    picked = chosen.subquery()
    order = [picked.c.created_at.desc()] if newest_first else []
    return (
        picked.outerjoin(SEATS, SEATS.c.table_id == picked.c.id)
        .select()
        .order_by(*order, picked.c.id, SEATS.c.seat)
    )


_BY_ID = _query(TABLES.c.id == bindparam("table_id"))
"""One table by id (``table_id``) and its seats: made once (issue 24: building the
statement, its subquery's columns, was a tenth of a join's CPU)."""


_TABLE_COLUMNS = [c.name for c in TABLES.c]
_SEAT_COLUMNS = [c.name for c in SEATS.c]

# The set-up's writes, made once with their values bound at each execution (issue 24:
# ``.values(...)`` of literal values coerced each value into a bound parameter and computed
# the statement's cache key afresh: a third of the set-up's SQL CPU, with the rows' models
# validated again, read back from SQL or made from checked values).
_ADD_TABLE = insert(TABLES)
_ADD_SEAT = insert(SEATS)
_CLAIM = (
    update(TABLES)
    .where(TABLES.c.id == bindparam("table_id"), TABLES.c.status == "open")
    .values(status="running", starting_since=bindparam("since"), start_error="")
)
_STARTED = (
    update(TABLES)
    .where(TABLES.c.id.in_(bindparam("table_ids", expanding=True)))
    .values(starting_since=None)
)


def _found(rows: Result[Any]) -> list[tuple[LobbyTable, list[LobbySeat]]]:
    """The tables and their seats, from the rows of a :func:`_query` statement."""
    found: dict[str, tuple[LobbyTable, list[LobbySeat]]] = {}
    for row in rows:
        if row.id not in found:
            table = LobbyTable.model_construct(**{c: getattr(row, c) for c in _TABLE_COLUMNS})
            found[row.id] = (table, [])
        if row.seat is not None:
            seat = LobbySeat.model_construct(**{c: getattr(row, c) for c in _SEAT_COLUMNS})
            found[row.id][1].append(seat)
    return list(found.values())


def _seat(table_id: str, seat: int) -> ColumnElement[bool]:
    """One seat's row."""
    return and_(SEATS.c.table_id == table_id, SEATS.c.seat == seat)


def _free_seat(table: LobbyTable, seats: list[LobbySeat], wanted: int | None) -> int:
    """The seat a joining player gets: ``wanted`` if it is free, else the first free one."""
    taken = {s.seat for s in seats}
    if wanted is not None:
        if wanted >= table.seats:  # a conflict with this table, not a malformed request
            raise ApiError(409, "bad_seat", f"the table has {table.seats} seats")
        if wanted in taken:
            raise ApiError(409, "seat_taken", f"seat {wanted} is taken")
        return wanted
    free = [s for s in range(table.seats) if s not in taken]
    if not free:
        raise ApiError(409, "table_full", f"table {table.id} is full")
    return free[0]


def _leave(db: Engine, table_id: str, seat_number: int) -> tuple[TableOut, bool]:
    """Free a seat (open table) or mark it abandoned (running game); says which."""
    with db.begin() as connection:
        table, seats = _read(connection, table_id)
        seat = next((s for s in seats if s.seat == seat_number), None)
        if seat is None or seat.kind != "human" or seat.left:
            raise ApiError(409, "not_seated", f"seat {seat_number} is not yours any more")
        running = table.status != "open"
        if running:
            connection.execute(update(SEATS).where(_seat(table_id, seat_number)).values(left=True))
            seats[seats.index(seat)] = seat.model_copy(update={"left": True})
        else:
            connection.execute(delete(SEATS).where(_seat(table_id, seat_number)))
            seats.remove(seat)
    return table_out(table, seats), running


def _claim_start(
    db: Engine, table_id: str, fill: str | None, repeat: bool = False
) -> tuple[LobbyTable, list[LobbySeat], list[int]]:
    """Mark an open, full table as running (once), filling free seats with bots if asked;
    returns it, its seats and the seats filled (a start not yet seen through is returned as
    it is, to be sent again; so is a running table to a ``repeat``)."""
    with db.begin() as connection:  # one read, the writes, one commit
        table, seats = _read(connection, table_id)
        if fill is not None:
            check_bot_level(api.get(table.game), fill)
        if table.status == "running" and (table.starting_since is not None or repeat):
            return table, seats, []  # an unfinished start, sent again
        if table.status != "open":
            raise ApiError(409, "table_not_open", f"table {table_id} is {table.status}")
        taken = {s.seat for s in seats}
        free = [s for s in range(table.seats) if s not in taken]
        if free and fill is None:
            raise ApiError(409, "table_not_full", f"seats {free} are free", {"free": free})
        bots = [  # fill is set when a seat is free (checked above)
            LobbySeat.model_construct(
                table_id=table_id, seat=s, kind="bot", name=bot_name(fill or "", s), bot_level=fill
            )
            for s in free
        ]
        if bots:
            connection.execute(_ADD_SEAT, [b.model_dump() for b in bots])
        running = {"status": "running", "starting_since": _now(), "start_error": ""}
        table = table.model_copy(update=running)  # rows read are not changed in place
        claimed = connection.execute(  # only if still open: a start at the same time lost
            _CLAIM, {"table_id": table_id, "since": table.starting_since}
        )
        if claimed.rowcount != 1:
            raise ApiError(409, "table_not_open", f"table {table_id} is being started")
        return table, sorted(seats + bots, key=lambda s: s.seat), free


def _reopen(db: Engine, table_id: str, filled: list[int], reason: str) -> None:
    """Undo a start whose game was not created: the table is open again (without the bots
    that start added), saying why, and may be started again."""
    with db.begin() as connection:
        reopened = connection.execute(
            update(TABLES)
            .where(
                TABLES.c.id == table_id,
                TABLES.c.status == "running",
                TABLES.c.starting_since.is_not(None),
            )
            .values(status="open", starting_since=None, start_error=reason[:500])
        )
        if reopened.rowcount != 1:
            return  # its game was seen meanwhile
        if filled:
            connection.execute(
                delete(SEATS).where(
                    SEATS.c.table_id == table_id,
                    SEATS.c.seat.in_(filled),
                    SEATS.c.kind == "bot",
                )
            )
    log.warning("a table's start failed: open again", table_id=table_id, reason=reason)


def _started(db: Engine, table_ids: list[str]) -> None:
    """The games of ``table_ids`` exist: their starts are done."""
    with db.begin() as connection:
        connection.execute(_STARTED, {"table_ids": table_ids})


def _retried(db: Engine, table_id: str) -> None:
    """A start sent again: the next look is ``CARAVEL_START_RETRY_S`` from now."""
    with db.begin() as connection:
        connection.execute(
            update(TABLES)
            .where(TABLES.c.id == table_id, TABLES.c.starting_since.is_not(None))
            .values(starting_since=_now())
        )


def _unfinished_starts(
    db: Engine, before: datetime
) -> tuple[list[tuple[LobbyTable, list[LobbySeat]]], datetime | None]:
    """Running tables whose start began before ``before`` and is not seen through, and
    when the earliest of those begun since began (None: none)."""
    unfinished = and_(TABLES.c.status == "running", TABLES.c.starting_since < before)
    later = select(func.min(TABLES.c.starting_since)).where(
        TABLES.c.status == "running", TABLES.c.starting_since >= before
    )
    with db.connect() as connection:
        found = _tables(connection, unfinished, limit=RECONCILE_BATCH)
        return found, connection.execute(later).scalar()


def _started_tables(db: Engine, after: str) -> list[str]:
    """The next ``LOST_CHECK_PAGE`` running tables whose start is done, by id after
    ``after``."""
    started = and_(
        TABLES.c.status == "running", TABLES.c.starting_since.is_(None), TABLES.c.id > after
    )
    query = select(TABLES.c.id).where(started).order_by(TABLES.c.id).limit(LOST_CHECK_PAGE)
    with db.connect() as connection:
        return list(connection.execute(query).scalars())


def _unfinish(db: Engine, table_ids: list[str]) -> list[tuple[LobbyTable, list[LobbySeat]]]:
    """Mark the starts of those of ``table_ids`` that are running with their start done as
    unfinished again (their game is gone); returns those tables with their seats."""
    with db.begin() as connection:
        connection.execute(
            update(TABLES)
            .where(
                TABLES.c.id.in_(table_ids),
                TABLES.c.status == "running",
                TABLES.c.starting_since.is_(None),
            )
            .values(starting_since=_now())
        )
        unfinished = and_(
            TABLES.c.id.in_(table_ids),
            TABLES.c.status == "running",
            TABLES.c.starting_since.is_not(None),
        )
        return _tables(connection, unfinished)


def _now() -> datetime:
    return datetime.now(UTC)
