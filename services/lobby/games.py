"""A running game over HTTP and WebSocket: moves, the seat's view and legal commands, and
the live stream of the events a seat may see. Nothing here knows which game it is: commands
go to the engine as they come, views come from the views projection."""

from __future__ import annotations

import asyncio
import contextlib
import re
import time
import uuid
from collections.abc import Awaitable, Callable, Coroutine
from typing import Annotated, Any, Literal, NamedTuple

import structlog
from fastapi import APIRouter, Body, Query, Request, WebSocket, WebSocketDisconnect
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, Field
from redis.exceptions import RedisError
from starlette.websockets import WebSocketState

from shared.bus.connection import is_cluster
from shared.bus.scripts import Batch, call
from shared.bus.tails import newest_first
from shared.contracts import (
    CommandEnvelope,
    CommandResult,
    decision_head,
    dump_json,
    json_bytes,
    load_json,
)
from shared.eventstore import PendingDecisions
from shared.games import api
from shared.httpapi import ERRORS, ApiError, Id
from shared.observability import bound
from shared.redis_replies import text

from . import lean
from .catalog import schema_ref
from .fanout import Decision
from .limits import Limits, Refused, client_of, forget
from .lobby import VIEW_WAIT_S, Auth, Lobby, LobbyDep, command_id_reused, not_seated
from .tokens import SeatClaim

log = structlog.get_logger("caravel.lobby")
router = APIRouter(tags=["games"])

# Rule violations of a command's shape (what the OpenAPI document describes): a 422. Every
# other one is a conflict with the game's state (its turn, board, money): a 409, and so is a
# command of another game (the document's commands are every game's: it fits the document,
# not this game).
SHAPE_CODES = {"malformed", "unknown_command"}
# A version a socket resumes after: digits only (no sign, exponent or fraction), at most 15.
AFTER = re.compile(r"[0-9]{1,15}")
# How many of a partition's newest decision requests a socket looks through for its seat's.
DECISION_LOOKBACK = 500

AfterVersion = Annotated[
    int | None,
    Query(
        ge=0,
        le=10**15,
        description="The newest version you know of (a command's answer says it): the "
        "answer is never older. It waits briefly for the views to reach it, else a 503 "
        "view_behind with Retry-After.",
    ),
]


class LegalOut(BaseModel):
    version: int = Field(description="The game's version these commands are legal at.")
    seat: int
    legal_commands: list[dict[str, Any]] = Field(
        description="Empty when you have nothing to decide (not your turn, or the game is over).",
        json_schema_extra={"items": schema_ref("LegalCommand")},
    )
    finished: bool = Field(
        default=False, description="The game is over: there is nothing left to decide, ever."
    )


class CommandOut(BaseModel):
    status: Literal["accepted", "duplicate"] = Field(
        examples=["accepted"], description="duplicate: a retry of a command already accepted."
    )
    version: int = Field(
        examples=[42],
        description="The game's version after the command: pass it as after_version to "
        "/view and /legal to read what it changed.",
    )
    command_id: str
    legal: LegalOut | None = Field(
        default=None,
        description="With ?legal=true: your legal commands from that version on.",
    )


@router.post(
    "/games/{game_id}/commands",
    response_model=CommandOut,
    responses=ERRORS,
    openapi_extra={"x-body": schema_ref("Command")},  # a game's command: see lobby.openapi
)
async def send_command(
    game_id: Id,
    command: Annotated[
        dict[str, Any],
        Body(
            examples=[{"type": "place", "unit": "colonist", "box": "dock"}],
            description="A command of the game for your seat: its type and fields "
            "(see your legal commands). An optional command_id makes retries safe.",
        ),
    ],
    request: Request,
    lobby: LobbyDep,
    authorization: Auth = None,
    legal: Annotated[
        bool, Query(description="Also answer your legal commands at the new version.")
    ] = False,
) -> Response:
    """Play a move for your seat: accepted with the game's new version (and, with
    ``?legal=true``, your legal commands from then on), or a 4xx with the rules' code and
    reason. A seat's WebSocket can send the same moves as ``command`` frames."""
    limits: Limits = request.app.state.limits
    client = client_of(request.scope)
    try:
        try:
            claim = lobby.verified(authorization, game_id)
        except ApiError:  # it draws on the client's rate too: a flood of them gets 429s
            await limits.take("commands", client)
            raise
        with bound(game=game_id, seat=claim.seat):
            admission = Admission(lobby, limits, client, game_id, claim, True, legal)
            out = await play(admission, command, legal)
    except Refused as refused:
        return refused.response()
    return _json(out)


@lean.lean(send_command)
async def _lean_command(request: Request) -> Response | None:
    """:func:`send_command` of a plainly valid request (:mod:`.lean`), else None."""
    game_id, fields = lean.path_id(request, "game_id"), lean.query(request)
    if game_id is None or fields is None or not fields.keys() <= {"legal"}:
        return None
    legal = fields.get("legal", "false")
    if legal not in ("true", "false"):
        return None
    command = await lean.json_object(request)
    if command is None:
        return None
    lobby: Lobby = request.app.state.lobby
    authorization = request.headers.get("authorization")
    return await send_command(game_id, command, request, lobby, authorization, legal == "true")


async def play(admission: Admission, command: dict[str, Any], legal: bool) -> Answer:
    """One move over HTTP, admitted (:class:`Admission`: the rate, the seat and the id
    checked, and on one Redis sent and answered in the same round trip): the engine's
    answer, or an :class:`ApiError` with the rules' code (nothing changed)."""
    envelope, result = await admission.admit(command)
    if result is None:
        with _command_bound(envelope):
            result = await admission.lobby.execute(envelope)
    return await answer(admission.lobby, envelope, result, legal, admission.pending)


# An HTTP move's answers (:class:`CommandOut`, :class:`LegalOut`) as plain dicts, their
# keys in the models' order: built from values already checked, encoded as the models
# encode them without making the models (validating a list of legal commands, dict by dict,
# and dumping it again cost more than the rest of the answer, issue 24).
Answer = dict[str, Any]


def _json(answer: Answer) -> Response:
    """``answer`` as the route's JSON answer (the response model's JSON: FastAPI's
    validation of it against the model again is skipped, as is the model's)."""
    return Response(json_bytes(answer), media_type="application/json")


def envelope_of(game_id: str, seat: int, command: dict[str, Any]) -> CommandEnvelope:
    """A seat's command as the engine takes it (an id drawn if the client gave none), or a
    422 ``malformed``."""
    fields = dict(command)
    kind = fields.pop("type", None)
    command_id = fields.pop("command_id", None) or uuid.uuid4().hex
    fields.pop("seat", None)
    if not isinstance(kind, str) or not isinstance(command_id, str):
        raise ApiError(422, "malformed", "a command has a string 'type' (and 'command_id')")
    try:
        return CommandEnvelope(
            command_id=command_id, game_id=game_id, seat=seat, type=kind, payload=fields
        )
    except ValueError as e:
        raise ApiError(422, "malformed", str(e).splitlines()[0]) from None


def _parsed(game_id: str, seat: int, command: dict[str, Any]) -> CommandEnvelope | ApiError:
    """:func:`envelope_of`, or its 422 to raise once the checks before it are made."""
    try:
        return envelope_of(game_id, seat, command)
    except ApiError as e:
        return e


def _command_bound(envelope: CommandEnvelope) -> contextlib.AbstractContextManager[None]:
    """A socket's command's id on the log lines while it is sent (the socket's game and
    seat are bound for its life)."""
    return bound(command=envelope.command_id)


async def answer(
    lobby: Lobby,
    envelope: CommandEnvelope,
    result: CommandResult,
    legal: bool = False,
    pending: PendingDecisions | None = None,
) -> Answer:
    """The engine's ``result`` of a command as :func:`run` answers it (a
    :class:`CommandOut`); ``pending``: the game's pending decisions read with the answer
    (read again if none, or older)."""
    version = accepted(envelope, result)
    out: Answer = {"status": result.status, "version": version}
    out["command_id"], out["legal"] = envelope.command_id, None
    if legal and envelope.seat is not None:  # a seat's command: the lobby always gives one
        read: PendingDecisions | Literal["unread"] = "unread"
        if pending is not None and pending.version >= version:
            read = pending
        out["legal"] = await _legal(lobby, envelope.game_id, envelope.seat, version, read)
    return out


def accepted(envelope: CommandEnvelope, result: CommandResult) -> int:
    """The game's version after a command the engine took (its ``result``), or the
    :class:`ApiError` of its refusal, raised."""
    if result.status == "rejected":
        code = result.code or "rejected"
        status = _status(code, envelope.type)
        raise ApiError(status, code, result.reason or "", {"command_id": envelope.command_id})
    return result.version or 0  # the engine gives one with every answer but a rejection


@router.get(
    "/games/{game_id}/view",
    responses={**ERRORS, 200: {"content": {"application/json": {"schema": schema_ref("View")}}}},
    response_class=JSONResponse,
    openapi_extra={"security": [{}]},  # no token: a spectator's view
)
async def get_view(
    game_id: Id, lobby: LobbyDep, authorization: Auth = None, after_version: AfterVersion = None
) -> JSONResponse:
    """The game as your seat sees it (with a seat token), or as a spectator (without)."""
    seat = (await lobby.claim(authorization, game_id)).seat if authorization else None
    view = await _view(lobby, game_id, seat, after_version)
    return JSONResponse(view)  # JSON-ready: no re-encoding


@router.get("/games/{game_id}/legal", response_model=LegalOut, responses=ERRORS)
async def get_legal(
    game_id: Id, lobby: LobbyDep, authorization: Auth = None, after_version: AfterVersion = None
) -> Response:
    """Your seat's legal commands now (empty when you have nothing to decide), and whether
    the game is over."""
    claim, pending = await lobby.claim_pending(authorization, game_id)
    return _json(await _legal(lobby, game_id, claim.seat, after_version, pending))


@lean.lean(get_legal)
async def _lean_legal(request: Request) -> Response | None:
    """:func:`get_legal` of a plainly valid request (:mod:`.lean`), else None."""
    game_id, fields = lean.path_id(request, "game_id"), lean.query(request)
    if game_id is None or fields is None or not fields.keys() <= {"after_version"}:
        return None
    try:
        after = lean.version(fields.get("after_version"))
    except ValueError:
        return None
    lobby: Lobby = request.app.state.lobby
    return await get_legal(game_id, lobby, request.headers.get("authorization"), after)


def _status(code: str, kind: str) -> int:
    """The HTTP status of an engine's refusal ``code`` of a command of type ``kind``."""
    if code == "unknown_game":
        return 404
    if code == "unknown_command" and any(kind in api.get(g).command_types() for g in api.names()):
        return 409  # another game's command
    return 422 if code in SHAPE_CODES else 409


async def _legal(
    lobby: Lobby,
    game_id: str,
    seat: int,
    after: int | None,
    pending: PendingDecisions | Literal["unread"] | None = "unread",
) -> Answer:
    """A seat's legal commands at ``after`` or later (a :class:`LegalOut`): those of the
    engine's decision requests at the log's version, which its append keeps in the game's
    meta (``pending``, read here unless given: one HMGET, never behind the log; issue 24, a
    projected view per HTTP read cost the services most of an HTTP move). Else (none kept:
    an archived game, a log moved in; a version the log has not reached) from the seat's
    view, as before."""
    if isinstance(pending, str):
        pending = await lobby.store.pending(game_id)
    if pending is not None and (after is None or pending.version >= after):
        return _legal_answer(pending.version, seat, pending.legal(seat), pending.over)
    return await _legal_of_view(lobby, game_id, seat, after)


def _legal_answer(version: int, seat: int, legal: list[dict[str, Any]], over: bool) -> Answer:
    """A :class:`LegalOut` as its dict."""
    return {"version": version, "seat": seat, "legal_commands": legal, "finished": over}


async def _legal_of_view(lobby: Lobby, game_id: str, seat: int, after: int | None) -> Answer:
    """A seat's legal commands at ``after`` or later, from its view. With none, the game may
    be over: then they are read at its last version, so that ``finished`` and ``version``
    agree."""
    view = await _view(lobby, game_id, seat, after)
    finished = False
    if not view["legal_commands"]:  # a game with a decision due is not over: no look-up
        newest = await lobby.store.last_event(game_id)
        finished = newest is not None and newest.type == api.GAME_ENDED
        if newest is not None and finished and view["version"] < newest.version:
            view = await _view(lobby, game_id, seat, newest.version)
    return _legal_answer(view["version"], seat, view["legal_commands"], finished)


@router.websocket("/games/{game_id}/ws")
async def events(
    websocket: WebSocket,
    game_id: str,
    after: str = "0",
    token: str | None = None,
    event: str | None = None,
) -> None:
    """The events your seat may see (with ?token=; public ones without), from version
    ``after`` + 1 on, then live. Reconnect with the last version you got, and that event's
    id as ``event``: nothing is missed and nothing comes twice, and a log that went back
    under it (a failover) closes the socket with 1012 for you to read the game again.
    A seat's socket also takes its moves: ``{"type": "command", "command": {...}}`` frames,
    each answered on the socket by a ``result`` or an ``error`` frame (see ``SocketMoves``).
    Closes after the game's last event; a refusal closes with a code and a reason (see the
    README)."""
    lobby: Lobby = websocket.app.state.lobby
    limits: Limits = websocket.app.state.limits
    client = client_of(websocket.scope)
    try:
        with limits.socket_slot(client):  # held before the client sees the socket open
            await websocket.accept()
            await limits.take("sockets", client)
            start = await _start(lobby, game_id, token, after, event)
            if not start.over:
                send = _serialized(websocket.send_text)
                streaming = stream_events(lobby, game_id, start.seat, start.after, send)
                moves = SocketMoves(lobby, limits, client, game_id, start.claim, send)
                # On the log lines of the socket's tasks (they copy the context): its moves
                # then bind only their command ids.
                with bound(game=game_id, seat=start.seat):
                    await _until_disconnect(websocket, streaming, moves)
            await websocket.close(reason="game_over")
    except Refused as refused:
        if websocket.client_state == WebSocketState.CONNECTING:
            await websocket.accept()  # then close with a reason the client can read
        code = 4429 if refused.status == 429 else refused.status
        await websocket.close(code=code, reason=f"{refused.code}: {refused.message}"[:120])
    except LogWentBack as e:
        log.warning("socket closed: the game's log went back", game=game_id, error=str(e))
        await websocket.close(code=1012, reason="log_went_back: read the game again")
    except RedisError as e:  # its pool is busy (a flood) or Redis is away: come back later
        log.warning("socket closed: redis does not answer", error=str(e))
        await websocket.close(code=1013, reason="redis_unavailable: try again shortly")
    except WebSocketDisconnect:
        return


def _serialized(send: Callable[[str], Awaitable[None]]) -> Callable[[str], Awaitable[None]]:
    """``send`` one frame at a time: the event stream and the moves' answers share a socket."""
    lock = asyncio.Lock()

    async def one_at_a_time(text: str) -> None:
        async with lock:
            await send(text)

    return one_at_a_time


class Admission:
    """A seat's moves admitted under the rules of ``POST /commands``: the seat's holder
    checked at every move (a token whose holder left moves nothing), the client's command
    rate, a reused command id refused; on one Redis the checks, the send and the first wait
    for the answer in one round trip. A socket's moves (:class:`SocketMoves`) and an HTTP
    move (``rate_first``: a move out of tokens is refused for its rate before its seat, as
    the rate limit of every other route is checked before its route runs) both go through
    it: an HTTP move used to take four round trips (the rate, the seat, the send and its
    wait), issue 24."""

    def __init__(
        self,
        lobby: Lobby,
        limits: Limits,
        client: str,
        game_id: str,
        claim: SeatClaim | None,
        rate_first: bool = False,
        read_pending: bool = False,
    ) -> None:
        self.lobby, self.limits, self.client = lobby, limits, client
        self.game_id, self.claim, self.rate_first = game_id, claim, rate_first
        # With ``read_pending`` (an HTTP move that answers its legal commands): the game's
        # pending decisions, read in the move's round trip once the engine answered.
        self.read_pending = read_pending
        self.pending: PendingDecisions | None = None
        # Moves go in one round trip with their checks (on one Redis) until one is refused:
        # a refused move closes the connection its wait blocked, so the moves after it go
        # the two-trip way until one passes.
        self.one_trip = lobby.sender.one_trip

    async def admit(self, command: dict[str, Any]) -> tuple[CommandEnvelope, CommandResult | None]:
        """The command, from the seat still held by this socket's token (and the token
        alive), with a token left in the client's bucket and its id not reused, refused in
        the order ``POST /commands`` refuses (seat, rate, shape, id); with the engine's
        answer when it was sent with its checks (:meth:`Lobby.execute_admitted`, one round
        trip), else None (the checks took one round trip, a batch of the bucket's and the
        seat's script calls: :meth:`Lobby.execute` sends it)."""
        if self.claim is None:
            message = "a spectator's socket sends no moves: open it with ?token="
            raise ApiError(403, "not_seated", message)
        if self.claim.expires < time.time():
            raise ApiError(401, "expired_token", "the seat token has expired; join again")
        parsed = _parsed(self.game_id, self.claim.seat, command)
        own_id = isinstance(parsed, CommandEnvelope) and command.get("command_id")
        checked = parsed if own_id and isinstance(parsed, CommandEnvelope) else None
        bucket = self.limits.bucket("commands", self.client)
        if self.one_trip and isinstance(parsed, CommandEnvelope):
            with _command_bound(parsed):
                verdict, wait, result, self.pending = await self.lobby.execute_admitted(
                    bucket, self.claim, parsed, checked, self.read_pending
                )
            if result is not None:
                return parsed, result
            self.one_trip = False
        else:
            verdict, wait = await self._checks(bucket, checked)
        admitted = await self._refuse(verdict, wait, parsed, checked)
        self.one_trip = self.lobby.sender.one_trip
        return admitted, None

    async def _checks(
        self, bucket: tuple[Any, list[str], list[Any]], checked: CommandEnvelope | None
    ) -> tuple[str, Any]:
        """The seat's verdict and the bucket's wait, in one batch of their script calls."""
        assert self.claim is not None
        if is_cluster(self.lobby.redis):
            return await self._checks_apart(bucket, checked)
        async with Batch(self.lobby.redis) as batch:
            batch.call(*bucket)
            batch.call(*self.lobby.seat_call(self.claim, checked))
            wait, reply = await batch.execute(raise_on_error=False)
        if isinstance(reply, Exception):  # the seat's check: no move without it
            raise reply
        if isinstance(wait, Exception):  # the bucket's alone
            wait = self.limits.unchecked(wait)
        return text(reply), wait

    async def _checks_apart(
        self, bucket: tuple[Any, list[str], list[Any]], checked: CommandEnvelope | None
    ) -> tuple[str, Any]:
        """:meth:`_checks` on a cluster: the bucket's call and the seat's sent at once (a
        pipeline to each node, as one batch would be), but the bucket, on its client's
        shard, waited for at most ``limits.BUCKET_WAIT_S`` past the seat's check, on the
        move's own shard (:meth:`~.limits.Limits.bucket_wait`); a bucket paused after a
        fault is not asked."""
        assert self.claim is not None
        seat = self.lobby.seat_call(self.claim, checked)
        if self.limits.paused(bucket):  # its node failed a moment ago: unchecked
            return text(await call(self.lobby.redis, *seat)), 0.0
        taking = asyncio.ensure_future(call(self.lobby.redis, *bucket))
        try:
            reply = await call(self.lobby.redis, *seat)
        except BaseException:
            taking.add_done_callback(forget)  # sent: left to end, as in a batch
            raise
        return text(reply), await self.limits.bucket_wait(bucket, taking)

    async def _check_rate(self, verdict: str, wait: Any, checked: CommandEnvelope | None) -> None:
        """:class:`Refused` (429) if the bucket had no token left (the command's id digest,
        stored by the checks, forgotten: the command goes no further)."""
        try:
            self.limits.check("commands", self.client, wait)
        except Refused:
            if checked is not None and verdict == "set":
                await self.lobby.forget_digest(checked)
            raise

    async def _refuse(
        self,
        verdict: str,
        wait: Any,
        parsed: CommandEnvelope | ApiError,
        checked: CommandEnvelope | None,
    ) -> CommandEnvelope:
        """The command, unless the checks' ``verdict`` and ``wait`` (the seat's, the
        bucket's) refuse it: its refusal is raised. A seat not cached is checked the slow
        way (SQL, then cached), and so is the id of its command."""
        assert self.claim is not None
        if self.rate_first:
            await self._check_rate(verdict, wait, checked)
        if verdict == "not_seated":
            raise not_seated(self.claim.seat)
        if verdict == "unknown":  # the seat is not cached: SQL, then cached
            await self.lobby.check_holder(self.claim)
        if not self.rate_first:
            await self._check_rate(verdict, wait, checked)
        if isinstance(parsed, ApiError):
            raise parsed
        if verdict == "reused" and checked is not None:
            raise command_id_reused(checked)
        if verdict == "unknown" and checked is not None:
            await self.lobby.check_reuse(checked)
        return parsed


class SocketMoves(Admission):
    """The moves a seat sends on its WebSocket (:class:`Admission`). Each ``command`` frame
    is answered on the socket, in the order sent, by

    - ``{"type": "result", "command_id", "status": "accepted"|"duplicate", "version"}``;
      the move's events and, when the seat must decide again, its ``decision`` frame (its
      legal commands) come on the same socket, as every event does; or
    - ``{"type": "error", "command_id", "status", "code", "message", "details"}``, with the
      status and code ``POST /commands`` would answer (a frame that is not a command:
      ``bad_frame``; a spectator's socket: ``not_seated``); nothing changed.
    """

    def __init__(
        self,
        lobby: Lobby,
        limits: Limits,
        client: str,
        game_id: str,
        claim: SeatClaim | None,
        send: Callable[[str], Awaitable[None]],
    ) -> None:
        super().__init__(lobby, limits, client, game_id, claim)
        self.send = send
        self.idle = asyncio.Event()  # no move between its frame and its answer
        self.idle.set()

    async def frame(self, text: str) -> None:
        """Answer one frame the client sent."""
        self.idle.clear()
        command_id = None
        try:
            command = _command_of(text)
            command_id = command.get("command_id")
            envelope, result = await self.admit(command)
            if result is None:
                with _command_bound(envelope):
                    result = await self.lobby.execute(envelope)
            version = accepted(envelope, result)  # CommandOut's fields, without the model
            answered = {
                "status": result.status,
                "version": version,
                "command_id": envelope.command_id,
            }
            await self.send(dump_json({"type": "result", **answered}))
        except ApiError as e:
            await self._error(e.status, e.code, e.message, e.details, command_id)
        except Refused as e:
            details = {} if e.retry_after_s is None else {"retry_after_s": e.retry_after_s}
            await self._error(e.status, e.code, e.message, details, command_id)
        finally:
            self.idle.set()

    async def _error(
        self, status: int, code: str, message: str, details: dict[str, Any], command_id: Any
    ) -> None:
        frame = {
            "type": "error",
            "command_id": command_id if isinstance(command_id, str) else None,
            "status": status,
            "code": code,
            "message": message,
            "details": details,
        }
        await self.send(dump_json(frame))


def _command_of(text: str) -> dict[str, Any]:
    """The command a ``command`` frame carries (its ``command_id`` inside it), or a 422
    ``bad_frame``."""
    try:
        frame = load_json(text)
    except ValueError:
        frame = None
    if not isinstance(frame, dict) or frame.get("type") != "command":
        raise ApiError(422, "bad_frame", 'send {"type": "command", "command": {...}} frames')
    command = frame.get("command")
    if not isinstance(command, dict):
        raise ApiError(422, "bad_frame", "a command frame's 'command' is an object")
    if "command_id" in frame and "command_id" not in command:
        command = {**command, "command_id": frame["command_id"]}
    return command


async def _until_disconnect(
    websocket: WebSocket, streaming: Coroutine[Any, Any, None], moves: SocketMoves
) -> None:
    """Run ``streaming`` until it ends or the client goes, answering the client's frames
    meanwhile: a client that leaves while its game is quiet gives its socket back at once,
    not at the game's next event; a move in flight when the game ends still gets its
    answer."""
    stream = asyncio.create_task(streaming)
    gone = asyncio.create_task(_receive(websocket, moves))
    done, pending = await asyncio.wait({stream, gone}, return_when=asyncio.FIRST_COMPLETED)
    if stream in done and gone in pending:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(moves.idle.wait(), moves.lobby.settings.command_timeout_s)
    for task in pending:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, WebSocketDisconnect):
            await task
    if gone in done:
        if stream.done() and not stream.cancelled():
            stream.exception()  # gone too (a send to a closed socket): retrieved, not logged
        gone.result()  # a move that failed beyond an answer (Redis away: closed with 1013)
        raise WebSocketDisconnect
    stream.result()


async def _receive(websocket: WebSocket, moves: SocketMoves) -> None:
    """Answer the client's frames, one after the other, until it goes."""
    while True:
        message = await websocket.receive()
        if message["type"] == "websocket.disconnect":
            return
        text = message.get("text")
        if text is None:
            text = (message.get("bytes") or b"").decode("utf-8", "replace")
        await moves.frame(text)


class _Start(NamedTuple):
    claim: SeatClaim | None
    after: int
    over: bool  # the game is over and ``after`` is at or past its end

    @property
    def seat(self) -> int | None:
        return None if self.claim is None else self.claim.seat


async def _start(
    lobby: Lobby, game_id: str, token: str | None, after: str, event: str | None = None
) -> _Start:
    """Where a socket starts: its seat, the version it follows from, and whether there is
    anything left to send; :class:`Refused` for a bad token (4401), a bad ``after``
    (4400) or a game that does not exist (4404); :class:`LogWentBack` if the log has no
    event ``event`` at ``after`` (the client's last event was lost to a failover)."""
    claim = None
    if token:
        try:
            claim = await lobby.claim(f"Bearer {token}", game_id)
        except ApiError as e:
            raise Refused(4401, e.code, e.message) from None
    if not AFTER.fullmatch(after):
        raise Refused(4400, "bad_after", "after is a version: a whole number from 0 on")
    newest = await lobby.store.last_event(game_id)  # an archived game's too
    # A table just started has its seats written before the engine creates its game: a
    # client that opens its socket at once follows it from the start.
    if newest is None and not await lobby.redis.exists(lobby.keys.seats(game_id)):
        raise Refused(4404, "unknown_game", f"there is no game {game_id} (yet)")
    last = newest.version if newest else 0
    version = int(after)
    if event and version:
        await _check_resume(lobby, game_id, version, event)
    if version > last:
        raise Refused(4400, "bad_after", f"after is past the game's version {last}")
    over = newest is not None and newest.type == api.GAME_ENDED and version >= last
    return _Start(claim, version, over)


async def _check_resume(lobby: Lobby, game_id: str, version: int, event_id: str) -> None:
    """Raise :class:`LogWentBack` unless the log's event at ``version`` is ``event_id``."""
    found = (await lobby.store.read_many({game_id: (version - 1, version)}))[game_id]
    if not found or found[0].event_id != event_id:
        raise LogWentBack(f"the log has no event {event_id} at version {version}")


async def _view(
    lobby: Lobby, game_id: str, seat: int | None, after: int | None = None
) -> dict[str, Any]:
    """The seat's projected view, at version ``after`` or later if given: the projection
    follows the log a little behind, so a client that was just told a version waits for it
    (``VIEW_WAIT_S`` at most: then a 503 to retry). 404 for a game that does not exist,
    409 ``version_ahead`` for a version the game has not reached by then: a client's own
    version can be ahead of the log for a moment, when a Redis restart lost the log's
    acknowledged tail and the engine writes it again from its pending commands (the chaos
    benchmark's human, refused at once, gave its game up: issue 25). Without ``after``, a game
    this process has not read lately is read at the version its log has now (the projection
    projects the games that are read: asking for one waits for its views). A read with
    ``after`` asks too, without waiting: a client polling with the version it last knew
    (its own move's) read a view that had reached it and never asked, so a game no one else
    read (two humans, a bot's ask lost in a failover) showed its old version for good."""
    if after is None:
        view = await lobby.views.read(game_id, seat, VIEW_WAIT_S)
    else:  # asking for the game's views (now and then) too: see ViewWaiter
        view = await lobby.views.read_at(game_id, seat, after, 0)
    if after is None or (view is not None and view["version"] >= after):
        if view is None:
            raise ApiError(404, "unknown_game", f"there is no game {game_id} (yet)")
        return view
    newest = await lobby.store.last_event(game_id)
    if newest is None and not await lobby.redis.exists(lobby.keys.seats(game_id)):
        raise ApiError(404, "unknown_game", f"there is no game {game_id} (yet)")
    view = await lobby.views.read_at(game_id, seat, after, VIEW_WAIT_S)
    if view is not None and view["version"] >= after:
        return view
    if newest is not None and after > newest.version:
        newest = await lobby.store.last_event(game_id) or newest
        if after > newest.version:
            message = f"game {game_id} is at version {newest.version}, not yet {after}"
            raise ApiError(409, "version_ahead", message, {"version": newest.version})
    raise ApiError(
        503,
        "view_behind",
        f"the views have not reached version {after} yet; retry shortly",
        {"version": view["version"] if view else None, "after_version": after},
        headers={"Retry-After": "1"},
    )


async def stream_events(
    lobby: Lobby,
    game_id: str,
    seat: int | None,
    after: int,
    send: Callable[[str], Awaitable[None]],
) -> None:
    """Send a game's events visible to ``seat`` after version ``after``: the log first, then
    what the fan-out delivers (listening starts before the log is read, so there is no gap;
    versions already sent are skipped). A seat is also sent its decision requests, each
    after the events of its version (the one due when the log is read, if any, first).
    Returns after the game's last event."""
    follower = _Follower(seat, after, send)
    async with lobby.fanout.listen(game_id) as deliveries:
        for event in await lobby.store.read(game_id, after):
            public = event.encode().public if event.visible_to(seat) else None
            ended = event.type == api.GAME_ENDED
            if await follower.event(event.version, public, ended, event.event_id):
                return
        if seat is not None:
            for request in await _due_decisions(lobby, game_id, seat, follower.sent):
                await follower.decision(request)
        while True:
            item = await deliveries.get()
            if isinstance(item, Decision):
                await follower.decision(item)
                continue
            for sent in item.events:  # parsed and encoded once for every socket
                if sent.version <= follower.sent:
                    follower.check(sent.version, sent.event_id)
                    continue
                public = sent.frame if sent.visible_to(seat) else None
                if await follower.event(sent.version, public, sent.ended, sent.event_id):
                    return


class LogWentBack(Exception):
    """An event delivered at a version a socket has sent is another event than the one sent:
    a failover rolled the game's log back. The socket closes (1012) so that its client reads
    the game again, instead of going on from events that are no longer in the log."""


REMEMBERED = 256  # the ids of a socket's last events sent, to tell a log that went back


class _Follower:
    """What one socket has sent: events up to ``sent``, and its seat's decision requests,
    each once and never ahead of the events of its version."""

    def __init__(
        self, seat: int | None, after: int, send: Callable[[str], Awaitable[None]]
    ) -> None:
        self.seat, self.sent, self.send = seat, after, send
        self.decided = 0  # the version of the last request sent
        self.held: Decision | None = None  # a request ahead of the events sent
        self.ids: dict[int, str] = {}  # version -> event id, of the last events sent

    async def event(
        self, version: int, public: str | None, last: bool, event_id: str | None = None
    ) -> bool:
        """Send one event (``public`` None: not the seat's to see); True after the last."""
        self.sent = version
        if event_id is not None:
            self.ids[version] = event_id
            self.ids.pop(version - REMEMBERED, None)
        if public is not None:
            await self.send(public)
        held, self.held = self.held, None
        if held is not None:
            await self.decision(held)
        return last

    def check(self, version: int, event_id: str | None) -> None:
        """Raise :class:`LogWentBack` if the event sent at ``version`` had another id."""
        sent = self.ids.get(version)
        if sent is not None and event_id is not None and sent != event_id:
            raise LogWentBack(f"version {version} is another event than the one sent")

    async def decision(self, decision: Decision) -> None:
        """Send the seat its decision request; a spectator gets every seat's, without the
        legal commands (whose turn it is and its deadline: the clock a table shows)."""
        head = decision.head
        mine = self.seat is None or head.seat == self.seat
        if not mine or head.version <= self.decided:
            return
        if head.version > self.sent:
            self.held = decision
        elif head.version == self.sent:  # an older one is stale: the game moved on
            self.decided = head.version
            await self.send(decision.frame(spectator=self.seat is None))


async def _due_decisions(lobby: Lobby, game_id: str, seat: int, version: int) -> list[Decision]:
    """The seat's request at ``version`` if one is due: the newest of the game's requests
    among the partition's last ``DECISION_LOOKBACK`` (older ones: GET /legal still says)."""
    stream = lobby.keys.decisions(lobby.keys.partition(game_id))
    for _, fields in await newest_first(lobby.redis, stream, DECISION_LOOKBACK):
        head = decision_head(fields[b"r"])
        if head.game_id != game_id or head.version > version:
            continue
        if head.version < version:
            return []  # the game's newest request is older than its log: nothing is due
        if head.seat == seat:
            return [Decision(fields[b"r"], head)]
    return []
