"""What every HTTP router of Caravel shares: one error shape, ``{"code", "message",
"details"}`` with a 4xx (or 503) status, the id path parameter, and the app's SQL engine.

The lobby and scoring routers raise :class:`ApiError`; :func:`install_error_handlers` turns it,
validation failures and Starlette's own errors into that shape.
"""

from __future__ import annotations

from typing import Annotated, Any

import structlog
from fastapi import Depends, FastAPI, Path, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field
from redis.exceptions import RedisClusterException, RedisError
from sqlalchemy import Engine
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match
from starlette.types import Scope

from shared.bus.faults import transient
from shared.games import api

log = structlog.get_logger("caravel.http")

# Seconds a client waits before retrying a 503: every 503 says it (RFC 9110).
RETRY_AFTER_S = 1

Id = Annotated[str, Path(pattern=r"^[A-Za-z0-9_.:-]{1,64}$", description="An id the lobby issued.")]


def get_db(request: Request) -> Engine:
    """The app's SQL engine (``app.state.db``): the routers of several services read SQL
    through it without knowing which service made the app."""
    return request.app.state.db  # type: ignore[no-any-return]


Db = Annotated[Engine, Depends(get_db)]


class ApiError(Exception):
    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        details: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status, self.code, self.message, self.details = status, code, message, details or {}
        self.headers = headers or {}


class ErrorOut(BaseModel):
    code: str = Field(examples=["out_of_turn"])
    message: str = Field(examples=["seat 2 has nothing to decide; waiting for seat 0 (place)"])
    details: dict[str, Any] = Field(default_factory=dict)


ERRORS: dict[int | str, dict[str, Any]] = {
    status: {"model": ErrorOut} for status in (400, 401, 403, 404, 409, 413, 422, 429, 503)
}


def install_error_handlers(app: FastAPI) -> None:
    """One error shape everywhere: {code, message, details}."""

    @app.exception_handler(ApiError)
    async def api_error(request: Request, e: ApiError) -> JSONResponse:
        return error_response(e.status, e.code, e.message, e.details, e.headers)

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, e: RequestValidationError) -> JSONResponse:
        errors = [
            {"at": ".".join(map(str, err["loc"])), "message": err["msg"]} for err in e.errors()
        ]
        return error_response(
            422, "invalid_request", "the request does not match the API", {"errors": errors}
        )

    @app.exception_handler(RedisError)
    @app.exception_handler(RedisClusterException)
    @app.exception_handler(AttributeError)
    async def redis_down(request: Request, e: Exception) -> JSONResponse:
        """Redis is down, does not answer, fails over, reshards or lacks the replicas its
        writes need (``shared.bus.faults``): a 503 the client may retry, not a 500. The
        client reconnects by itself on the next request, so nothing needs a restart. Any
        other error of these types is a bug: it stays a 500."""
        if not transient(e):
            raise e
        log.warning("redis does not answer", path=request.url.path, error=repr(e))
        return error_response(
            503, "redis_unavailable", "the game store does not answer; retry shortly"
        )

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, e: StarletteHTTPException) -> JSONResponse:
        code = {404: "not_found", 405: "method_not_allowed"}.get(e.status_code, "http_error")
        response = error_response(e.status_code, code, str(e.detail))
        response.headers.update(e.headers or {})
        if e.status_code == 405:
            response.headers["Allow"] = ", ".join(allowed_methods(app, request.scope))
        return response


def error_response(
    status: int,
    code: str,
    message: str,
    details: Any = None,
    headers: dict[str, str] | None = None,
) -> JSONResponse:
    """The one error shape; a 503 always says when to retry (``Retry-After``)."""
    body = {"code": code, "message": message, "details": details or {}}
    response = JSONResponse(status_code=status, content=body, headers=headers)
    if status == 503:
        response.headers.setdefault("Retry-After", str(RETRY_AFTER_S))
    return response


def allowed_methods(app: FastAPI, scope: Scope) -> list[str]:
    """Every method some route takes at the request's path, found by asking each route with
    each method. Starlette's own ``Allow`` names only the first route whose path matched,
    though ``GET`` and ``POST`` of one path are two routes; RFC 9110 wants them all."""
    return [
        method
        for method in METHODS
        if any(r.matches({**scope, "method": method})[0] == Match.FULL for r in app.router.routes)
    ]


METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")


def game_named(name: str) -> api.AnyGame:
    """The registered game ``name``; 422 ``unsupported_game`` listing the known ones."""
    try:
        return api.get(name)
    except api.UnknownGame as e:
        message = f"unknown game {name!r}; known: {', '.join(e.known)}"
        raise ApiError(422, "unsupported_game", message, {"known": e.known}) from None
