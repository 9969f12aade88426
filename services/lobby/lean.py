"""The two routes of an HTTP move (``POST /games/{id}/commands`` and ``GET
/games/{id}/legal``) without FastAPI's request handling when the request is plainly
well-formed: its endpoint called straight away with the values read here.

FastAPI's handler (its dependencies solved, the path, query and body validated against
their declarations, the telemetry of each step) cost about a fifth of the lobby's CPU per
request (issue 24). A request this module cannot read as plainly valid (any other query, a
body that is not a JSON object, an odd content type) goes to FastAPI's handler as before:
its errors and their shapes are FastAPI's. The routes' OpenAPI operations are still made
from their declarations: nothing here changes them."""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from fastapi import Request
from fastapi.responses import Response
from fastapi.routing import APIRoute

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
    """Register the decorated reader as ``endpoint``'s (its route has ``LeanRoute``)."""

    def register(reader: Lean) -> Lean:
        LEAN[endpoint] = reader
        return reader

    return register


class LeanRoute(APIRoute):
    """A route whose requests go to its endpoint's lean reader first, if it has one
    (:data:`LEAN`, looked up per request: a route is made before its reader is
    registered), and to FastAPI's handler when the reader leaves them (None)."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        full = super().get_route_handler()
        endpoint = self.endpoint

        async def handler(request: Request) -> Response:
            reader = LEAN.get(endpoint)
            if reader is not None and (response := await reader(request)) is not None:
                return response
            return await full(request)

        return handler


def game_id(request: Request) -> str | None:
    """The path's game id if :data:`ID` takes it as it is."""
    value = request.path_params.get("game_id")
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
