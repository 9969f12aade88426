"""A running game over HTTP and WebSocket: moves, the seat's view and legal commands, and
the live stream of the events a seat may see. Nothing here knows which game it is: commands
go to the engine as they come, views come from the views projection."""

from __future__ import annotations

import json
import uuid
from collections.abc import Awaitable, Callable
from typing import Annotated, Any

from fastapi import APIRouter, Body, WebSocket, WebSocketDisconnect
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field
from structlog.contextvars import bound_contextvars

from shared.contracts import CommandEnvelope
from shared.games import api
from shared.httpapi import ERRORS, ApiError, Id
from shared.views import read_view

from .catalog import command_body_schema
from .lobby import Auth, Lobby, LobbyDep

router = APIRouter(tags=["games"])

# Rule violations the caller caused by timing rather than by the command's content.
CONFLICT_CODES = {"out_of_turn", "game_over", "game_exists"}


class CommandOut(BaseModel):
    status: str = Field(examples=["accepted"])
    version: int | None = Field(examples=[42])
    command_id: str


class LegalOut(BaseModel):
    version: int
    seat: int
    legal_commands: list[dict[str, Any]]


@router.post(
    "/games/{game_id}/commands",
    response_model=CommandOut,
    responses=ERRORS,
    openapi_extra={
        "requestBody": {"content": {"application/json": {"schema": command_body_schema()}}}
    },
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
    lobby: LobbyDep,
    authorization: Auth = None,
) -> CommandOut:
    """Play a move for your seat: accepted with the game's new version, or a 4xx with
    the rules' code and reason."""
    claim = await lobby.claim(authorization, game_id)
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
        result = await lobby.execute(envelope)
    if result.status == "rejected":
        code = result.code or "rejected"
        status = 404 if code == "unknown_game" else 409 if code in CONFLICT_CODES else 422
        raise ApiError(status, code, result.reason or "", {"command_id": command_id})
    return CommandOut(status=result.status, version=result.version, command_id=command_id)


@router.get(
    "/games/{game_id}/view",
    responses={**ERRORS, 200: {"content": {"application/json": {"schema": {"type": "object"}}}}},
    response_class=JSONResponse,
)
async def get_view(game_id: Id, lobby: LobbyDep, authorization: Auth = None) -> JSONResponse:
    """The game as your seat sees it (with a seat token), or as a spectator (without)."""
    seat = (await lobby.claim(authorization, game_id)).seat if authorization else None
    return JSONResponse(await _view(lobby, game_id, seat))  # JSON-ready: no re-encoding


@router.get("/games/{game_id}/legal", response_model=LegalOut, responses=ERRORS)
async def get_legal(game_id: Id, lobby: LobbyDep, authorization: Auth = None) -> LegalOut:
    """Your seat's legal commands now (empty when you have nothing to decide)."""
    seat = (await lobby.claim(authorization, game_id)).seat
    view = await _view(lobby, game_id, seat)
    return LegalOut(version=view["version"], seat=seat, legal_commands=view["legal_commands"])


@router.websocket("/games/{game_id}/ws")
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
            seat = (await lobby.claim(f"Bearer {token}", game_id)).seat
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


async def _view(lobby: Lobby, game_id: str, seat: int | None) -> dict[str, Any]:
    view = await read_view(lobby.redis, lobby.keys, game_id, seat)
    if view is None:
        raise ApiError(404, "unknown_game", f"there is no game {game_id} (yet)")
    return view


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
    async with lobby.fanout.listen(game_id) as notifications:
        sent = after
        for event in await lobby.store.read(game_id, after):
            sent = event.version
            if event.visible_to(seat):
                await send(event.encode().public)
            if event.type == api.GAME_ENDED:
                return
        while True:
            notification = await notifications.get()
            if notification.version <= sent:
                continue
            for raw in notification.events():
                if raw["version"] > sent and api.Event.from_dict(raw).visible_to(seat):
                    await send(json.dumps(raw, separators=(",", ":")))
                sent = max(sent, raw["version"])
                if raw["type"] == api.GAME_ENDED:
                    return
