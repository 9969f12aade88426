"""The browser client: its pages and static files, and the public view of a finished game at
any version (what the replay page steps through).

The pages are static HTML and plain JavaScript modules under ``static/`` (no build step, no
CDN): a generic shell that talks to the HTTP API and the WebSocket, and one drawing module
per game, chosen by the game's name, with a generic fallback that shows any view as a tree.
They stay out of the OpenAPI document; the replay view is part of the API.

``/tables/{id}`` is both the table's JSON (``tables.get_table``) and its page: a browser's
navigation (``Accept: text/html`` first) gets the page, every other client the JSON; so is
``/games/{id}`` (a browser is sent to the table's page). A browser that asks for a page
that is not there gets a page saying so, with a link home.
"""

from __future__ import annotations

from collections import OrderedDict
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import quote

from fastapi import APIRouter, FastAPI, Query, Request
from fastapi.responses import FileResponse, JSONResponse, RedirectResponse
from fastapi.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from shared.contracts import load_json
from shared.eventstore import GameCodec
from shared.games import api
from shared.httpapi import ERRORS, ApiError, Id

from .catalog import schema_ref
from .lobby import Lobby, LobbyDep

STATIC = Path(__file__).parent / "static"
REPLAY_CACHE_GAMES = 16  # finished games whose replayed state is kept to step on from

router = APIRouter()


@router.get("/", include_in_schema=False)
def home() -> FileResponse:
    return _page("index.html")


@router.get("/games/{game_id}/replay", include_in_schema=False)
def replay_page(game_id: Id) -> FileResponse:
    return _page("replay.html")


def _replay_schema() -> dict[str, Any]:
    return {
        "type": "object",
        "required": ["version", "last_version", "event", "view"],
        "properties": {
            "version": {"type": "integer", "minimum": 1},
            "last_version": {"type": "integer", "minimum": 1},
            "event": {"anyOf": [{"type": "object"}, {"type": "null"}]},
            "view": schema_ref("View"),
        },
    }


@router.get(
    "/games/{game_id}/replay/view",
    tags=["games"],
    responses={**ERRORS, 200: {"content": {"application/json": {"schema": _replay_schema()}}}},
    response_class=JSONResponse,
)
async def replay_view(
    game_id: Id,
    lobby: LobbyDep,
    request: Request,
    version: Annotated[int | None, Query(ge=1, le=10**15)] = None,
) -> JSONResponse:
    """A finished game as a spectator saw it at ``version`` (none: its end): the public
    view, the public event of that version (null if it was one seat's) and the game's last
    version. 409 ``game_not_finished`` while the game runs (a replay shows no live game) and
    409 ``bad_version`` past its last version (a conflict with the game, not a bad shape)."""
    log = await _finished_log(lobby, game_id)
    last = log[-1].version
    at = last if version is None else version
    if at > last:
        raise ApiError(409, "bad_version", f"the game's last version is {last}", {"last": last})
    replays: Replays = request.app.state.replays
    state = replays.state_at(game_id, log, at)
    view = api.of(state).view(state, None)
    view["version"] = at
    event = log[at - 1]
    public = load_json(event.encode().public) if event.visible_to(None) else None
    return JSONResponse({"version": at, "last_version": last, "event": public, "view": view})


async def _finished_log(lobby: Lobby, game_id: str) -> list[Any]:
    """The whole log of a finished game (with secrets: server side only); 404 for no game,
    409 for one not over."""
    newest = await lobby.store.last_event(game_id)
    if newest is None:
        raise ApiError(404, "unknown_game", f"there is no game {game_id}")
    if newest.type != api.GAME_ENDED:
        message = f"game {game_id} is not over: watch it live instead"
        raise ApiError(409, "game_not_finished", message, {"version": newest.version})
    return await lobby.store.read(game_id)


class Replays:
    """Replayed states of the finished games being stepped through, newest used last: a
    replay mostly moves forward one step at a time, so each step applies one event to the
    state of the step before instead of replaying the log from its start."""

    def __init__(self, games: int = REPLAY_CACHE_GAMES) -> None:
        self.games = games
        self.states: OrderedDict[str, tuple[int, Any]] = OrderedDict()
        self.codec = GameCodec()

    def state_at(self, game_id: str, log: list[Any], version: int) -> Any:
        """The state after the first ``version`` events of ``log`` (the game's whole log)."""
        cached = self.states.pop(game_id, None)
        if cached is not None and cached[0] <= version:
            at, state = cached
        else:
            at, state = 1, self.codec.replay(log[:1])
        for event in log[at:version]:
            self.codec.apply(state, event)
        self.states[game_id] = (version, state)
        while len(self.states) > self.games:
            self.states.popitem(last=False)
        return state


def _page(name: str) -> FileResponse:
    """A page, never cached: a new version of the client is seen at the next visit."""
    return FileResponse(STATIC / name, headers={"Cache-Control": "no-cache"})


class BrowserPages:
    """ASGI middleware for a browser's navigations (``GET`` asking for HTML before anything
    else): ``/tables/{id}`` gets the table's page, ``/games/{id}`` is sent there (303), and
    a 404 becomes the not-found page with a link home. The JSON API answers every other
    request, and every client that asks for JSON."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if not _is_navigation(scope):
            await self.app(scope, receive, send)
            return
        parts = scope["path"].strip("/").split("/")
        if len(parts) == 2 and parts[0] == "tables":
            await _page("table.html")(scope, receive, send)
            return
        if len(parts) == 2 and parts[0] == "games":
            where = f"/tables/{quote(parts[1])}"
            await RedirectResponse(where, 303)(scope, receive, send)
            return
        missing = False

        async def html_for_404(message: Message) -> None:
            nonlocal missing
            if message["type"] == "http.response.start" and message["status"] == 404:
                missing = True
            if not missing:
                await send(message)

        await self.app(scope, receive, html_for_404)
        if missing:
            page = FileResponse(STATIC / "notfound.html", 404, {"Cache-Control": "no-cache"})
            await page(scope, receive, send)


def _is_navigation(scope: Scope) -> bool:
    if scope["type"] != "http" or scope["method"] != "GET":
        return False
    accept = dict(scope["headers"]).get(b"accept", b"").decode("latin-1")
    return bool(accept.split(",")[0].strip().startswith("text/html"))


def install(app: FastAPI) -> None:
    """Serve the client on ``app``: its pages, its static files and the replay view."""
    app.state.replays = Replays()
    app.include_router(router)
    app.mount("/static", StaticFiles(directory=STATIC), name="static")
    app.add_middleware(BrowserPages)
