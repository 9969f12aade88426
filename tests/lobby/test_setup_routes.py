"""A table's set-up routes (``POST /tables``, ``/tables/{id}/join``, ``/tables/{id}/start``)
answered by their lean readers (``lean.LeanDispatch``, issue 24) as FastAPI's handler
answers them: the same statuses, content types and bodies, the same errors."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
from redis.asyncio import Redis

from shared.bus import Keys

from .helpers import SEATS_FROM_ONE_ADDRESS, bearer, running_lobby

LEAN = "application/json"  # what the lean readers take
HANDLER = "application/json; charset=utf-8"  # what they leave to FastAPI's handler


async def _set_up(client: httpx.AsyncClient, kind: str) -> list[tuple[int, str, Any]]:
    """A table of a human and a bot made, joined and started with bodies of content type
    ``kind``, and the errors of each route: each answer's status, content type and body
    (the table's id and the seat's token left out)."""
    headers = {"content-type": kind}
    answers: list[httpx.Response] = []
    table_body = b'{"game": "age_of_discovery", "seats": 2, "bots": {"1": "random"}}'
    answers.append(await client.post("/tables", content=table_body, headers=headers))
    table = answers[-1].json()["id"]
    answers.append(await client.post("/tables", content=b'{"seats": 0}', headers=headers))
    answers.append(await client.post("/tables", content=b'{"seats": 9}', headers=headers))
    join = f"/tables/{table}/join"
    answers.append(await client.post(join, content=b'{"name": "Ana"}', headers=headers))
    token = answers[-1].json()["token"]
    answers.append(await client.post(join, content=b'{"name": "Bea"}', headers=headers))
    answers.append(await client.post(join, content=b'{"name": ""}', headers=headers))
    start = f"/tables/{table}/start"
    answers.append(await client.post(start, content=b"{}", headers=headers))  # no token
    answers.append(await client.post(start, content=b'{"x": 1}', headers=headers))
    answers.append(await client.post(start, content=b"{}", headers={**headers, **bearer(token)}))
    again = await client.post(start, headers=bearer(token))  # no body: the start's default
    answers.append(again)
    seen = []
    for answer in answers:
        body = answer.text.replace(table, "<table>").replace(token, "<token>")
        seen.append((answer.status_code, answer.headers["content-type"], body))
    return seen


async def test_a_set_up_is_answered_alike_by_the_lean_readers_and_fastapis_handler(
    redis_url: str, keys: Keys, database_url: str, tmp_path: Path
) -> None:
    serve = running_lobby(redis_url, keys, database_url, tmp_path, **SEATS_FROM_ONE_ADDRESS)
    async with serve as client:
        lean, handler = await _set_up(client, LEAN), await _set_up(client, HANDLER)
    assert lean == handler
    statuses = [status for status, _, _ in lean]
    assert statuses == [201, 422, 422, 201, 409, 422, 401, 422, 200, 409]
    assert lean[0][1] == "application/json"


def test_no_route_before_the_lean_set_up_routes_takes_their_paths(redis_url: str) -> None:
    """``lean.LeanDispatch`` gives the set-up's three routes their requests before the
    router tries any other: that is the router's own choice only while no route it tries
    first takes their paths."""
    from fastapi.routing import APIRoute, _IncludedRouter
    from sqlalchemy import create_engine
    from starlette.routing import BaseRoute, Match

    from services.lobby import lean, tables
    from services.lobby.app import create_app
    from shared.settings import Settings

    app = create_app(
        Redis.from_url(redis_url), Keys("lean"), create_engine("sqlite://"), Settings()
    )
    dispatch = app.router.middleware_stack
    assert isinstance(dispatch, lean.LeanDispatch)
    served = {route.endpoint for route, _ in dispatch.by_method["POST"]}
    assert {tables.create_table, tables.join, tables.start} <= served
    flat: list[BaseRoute] = []
    for route in app.router.routes:
        included = isinstance(route, _IncludedRouter)
        flat.extend(route.original_router.routes if included else [route])
    for path, endpoint in (
        ("/tables", tables.create_table),
        ("/tables/t-1/join", tables.join),
        ("/tables/t-1/start", tables.start),
    ):
        scope = {"type": "http", "method": "POST", "path": path, "root_path": ""}
        first = next(r for r in flat if r.matches(scope)[0] == Match.FULL)
        assert isinstance(first, APIRoute) and first.endpoint is endpoint, (path, first)
