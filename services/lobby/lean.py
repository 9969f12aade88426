"""The two routes of an HTTP move (``POST /games/{id}/commands`` and ``GET
/games/{id}/legal``) without FastAPI's routing and request handling when the request is
plainly well-formed: its endpoint called straight away with the values read here.

FastAPI's handler (its dependencies solved, the path, query and body validated against
their declarations, the telemetry of each step) cost about a fifth of the lobby's CPU per
request, and its routing (each route and included router tried in turn, twice for the
one that matches) about as much again (issue 24). :class:`LeanDispatch`, the router's
innermost layer (every middleware and exception handler still around it), matches these
routes' own paths first and gives a request to its endpoint's lean reader. A request the
reader cannot read as plainly valid (any other query, a body that is not a JSON object, an
odd content type) goes to the router and FastAPI's handler as before, its body given again:
its errors and their shapes are FastAPI's. The routes' OpenAPI operations are still made
from their declarations: nothing here changes them. A table's set-up (``POST /tables``,
``/tables/{id}/join``, ``/tables/{id}/start``) has lean readers too (``tables.py``)."""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import Response
from fastapi.routing import APIRoute, APIRouter
from starlette._utils import get_route_path
from starlette.types import ASGIApp, Receive, Scope, Send

from .idempotency import replay

# What ``shared.httpapi.Id`` accepts (its pattern, anchored as pydantic anchors it).
ID = re.compile(r"[A-Za-z0-9_.:-]{1,64}")
# A version as ``AfterVersion`` takes it (0 to 10**15), in its one plain spelling: digits
# without a sign, spaces or leading zeros (any other spelling goes to FastAPI).
VERSION = re.compile(r"0|[1-9][0-9]{0,15}")
MAX_VERSION = 10**15

# A route's lean reader: the endpoint's answer, or None for FastAPI's handler to answer.
Lean = Callable[[Request], Awaitable[Response | None]]
LEAN: dict[Callable[..., Any], Lean] = {}  # endpoint -> its lean reader


def lean(endpoint: Callable[..., Any]) -> Callable[[Lean], Lean]:
    """Register the decorated reader as ``endpoint``'s (:func:`install` serves it)."""

    def register(reader: Lean) -> Lean:
        LEAN[endpoint] = reader
        return reader

    return register


def install(app: FastAPI, *routers: APIRouter) -> None:
    """Serve the routes of ``routers`` that have a lean reader through :class:`LeanDispatch`,
    in front of ``app``'s routing (after its middlewares and exception handlers). Their
    paths must be matched by no route the app tries before them (``tests/lobby/
    test_legal.py`` checks the app routes them alike)."""
    routes = [
        (route, LEAN[route.endpoint])
        for router in routers
        for route in router.routes
        if isinstance(route, APIRoute) and route.endpoint in LEAN
    ]
    app.router.middleware_stack = LeanDispatch(app.router.middleware_stack, routes)


class LeanDispatch:
    """The app's router behind a look at the lean routes first: a request of one of their
    methods whose path their pattern takes goes to its reader (path parameters, route and
    endpoint in the scope as the router puts them); the router gets every other request,
    and those the reader leaves (None), their body given again if the reader read it."""

    def __init__(self, app: ASGIApp, routes: list[tuple[APIRoute, Lean]]) -> None:
        self.app = app
        self.by_method: dict[str, list[tuple[APIRoute, Lean]]] = {}
        for route, reader in routes:
            for method in (route.methods or set()) - {"HEAD"}:  # HEAD: the router's
                self.by_method.setdefault(method, []).append((route, reader))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            for route, reader in self.by_method.get(scope["method"], ()):
                if (found := route.path_regex.match(get_route_path(scope))) is not None:
                    await self._lean(route, reader, found.groupdict(), scope, receive, send)
                    return
        await self.app(scope, receive, send)

    async def _lean(
        self,
        route: APIRoute,
        reader: Lean,
        params: dict[str, str],
        scope: Scope,
        receive: Receive,
        send: Send,
    ) -> None:
        """``reader``'s answer to the request, else the router's."""
        convert = route.param_convertors
        scope["path_params"] = {name: convert[name].convert(v) for name, v in params.items()}
        scope["endpoint"], scope["route"] = route.endpoint, route
        request = Request(scope, receive, send)
        response = await reader(request)
        if response is not None:
            await response(scope, receive, send)
            return
        body: bytes | None = getattr(request, "_body", None)  # read by the reader
        await self.app(scope, receive if body is None else replay(body, receive), send)


def path_id(request: Request, name: str) -> str | None:
    """The path's id ``name`` (``game_id``, ``table_id``) if :data:`ID` takes it as it is."""
    value = request.path_params.get(name)
    return value if isinstance(value, str) and ID.fullmatch(value) else None


def query(request: Request) -> dict[str, str] | None:
    """The query's fields, each named once (None: a field named twice, or not a plain
    ``name=value``)."""
    raw: bytes = request.scope["query_string"]
    if not raw:
        return {}
    fields: dict[str, str] = {}
    for pair in raw.decode("latin-1").split("&"):
        name, equals, value = pair.partition("=")
        if not equals or name in fields or "%" in pair or "+" in pair:
            return None
        fields[name] = value
    return fields


def version(text: str | None) -> int | None:
    """An ``after_version`` (None: not given); ValueError if not in its plain spelling."""
    if text is None:
        return None
    if not VERSION.fullmatch(text) or int(text) > MAX_VERSION:
        raise ValueError(text)
    return int(text)


async def json_object(request: Request) -> dict[str, Any] | None:
    """The request's body as a JSON object, sent as ``application/json`` with its length
    (None: anything else, for FastAPI's handler to read and answer). A chunked body is
    FastAPI's to read: one past the size limit stops the read with the chunk that passes
    it (``LimitsMiddleware``), and a second read after that chunk, the last, would wait
    for one that never comes; with a length the middleware refused it before."""
    headers = request.headers
    if headers.get("content-type") != "application/json" or "content-length" not in headers:
        return None
    try:
        body = await request.json()  # as FastAPI reads it (kept on the request for it)
    except Exception:
        return None
    return body if isinstance(body, dict) else None
