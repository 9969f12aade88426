"""A seat's legal commands over HTTP (``GET /legal``, ``POST /commands?legal=true``):
the rules' own for that seat at the log's version, read-your-writes, and answered from the
engine's decision requests, without the views projection (issue 24)."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import httpx
import pytest
from redis.asyncio import Redis

from shared.bus import Keys
from shared.eventstore import EventStore, GameCodec
from shared.games import api

from .helpers import SEATS_FROM_ONE_ADDRESS, bearer, running_lobby


class Rules:
    """The game's state as its log has it, followed event by event (server side: the test
    knows what every seat may do)."""

    def __init__(self, store: EventStore, game_id: str) -> None:
        self.store, self.game_id, self.codec = store, game_id, GameCodec()
        self.state: Any = None
        self.version = 0

    async def at(self, version: int) -> None:
        for event in await self.store.read(self.game_id, self.version):
            if event.version > version:
                break
            if self.state is None:
                self.state = self.codec.initial(event)
            else:
                self.codec.apply(self.state, event)
            self.version = event.version
        assert self.version == version

    def legal(self, seat: int) -> dict[str, Any]:
        game = api.of(self.state)
        commands = [c.to_dict() for c in game.legal_commands(self.state, seat)]
        over = game.is_over(self.state)
        return {"version": self.version, "seat": seat, "legal_commands": commands, "finished": over}


async def _legal(client: httpx.AsyncClient, game: str, token: str, after: int) -> Any:
    answer = await client.get(
        f"/games/{game}/legal", params={"after_version": after}, headers=bearer(token)
    )
    assert answer.status_code == 200, answer.json()
    return answer.json()


@pytest.mark.parametrize("game_name", ["age_of_discovery", "navegador"])
async def test_each_seats_legal_commands_are_the_rules_at_the_logs_version(
    redis: Redis,
    redis_url: str,
    keys: Keys,
    database_url: str,
    tmp_path: Path,
    game_name: str,
) -> None:
    """Two humans play a whole game over HTTP, each move ``POST ?legal=true`` plus the
    other seat's ``GET /legal?after_version=``: every answer is, for its seat alone, the
    rules' legal commands at the log's version (no other seat's commands; empty off turn),
    ``finished`` once the game is over. And no move asked for the game's views: the view
    the table's start projected is never projected again (before, every HTTP read of the
    legal commands had the views projection project the game at each of its events)."""
    store = EventStore(redis, keys)
    async with running_lobby(
        redis_url, keys, database_url, tmp_path, **SEATS_FROM_ONE_ADDRESS
    ) as client:
        table = (await client.post("/tables", json={"seats": 2, "game": game_name})).json()
        joined = [
            (await client.post(f"/tables/{table['id']}/join", json={"name": n})).json()
            for n in ("A", "B")
        ]
        tokens = [j["token"] for j in joined]
        game = table["id"]
        started = await client.post(f"/tables/{game}/start", headers=bearer(tokens[0]))
        assert started.status_code == 200, started.json()
        rules, rng, moves = Rules(store, game), random.Random(7), 0
        version = start = await store.version(game)
        await rules.at(start)
        answers = [await _legal(client, game, t, version) for t in tokens]
        for _ in range(3000):
            assert answers == [rules.legal(0), rules.legal(1)]
            if answers[0]["finished"]:
                break
            seat = 0 if answers[0]["legal_commands"] else 1
            command = rng.choice(answers[seat]["legal_commands"])
            moved = await client.post(
                f"/games/{game}/commands",
                params={"legal": "true"},
                json=command,
                headers=bearer(tokens[seat]),
            )
            assert moved.status_code == 200, moved.json()
            version, moves = moved.json()["version"], moves + 1
            await rules.at(await store.version(game))  # any automatic events after it too
            mine = moved.json()["legal"]
            assert mine == rules.legal(seat) and rules.version == version  # nobody else moved
            other = await _legal(client, game, tokens[1 - seat], version)
            answers = [other, mine] if seat else [mine, other]
            answers[seat] = await _legal(client, game, tokens[seat], version)
        else:
            raise AssertionError("the game did not end")
        assert moves > 20 and answers[0]["finished"] and answers[1]["finished"]
        projected = await redis.hget(keys.view(game), "version")
        assert projected is not None and int(projected) <= start < rules.version


async def test_the_move_routes_answer_any_spelling_as_fastapi_validates_it(
    redis_url: str, keys: Keys, database_url: str, tmp_path: Path
) -> None:
    """The two routes of an HTTP move answer a plainly valid request themselves
    (``services.lobby.lean``) and leave every other spelling to FastAPI: the same answer
    for a version spelled ``0`` or ``00``, ``legal=true`` or ``legal=1``; FastAPI's 422s for
    what it refuses (a negative or too large version, a bad id, a body that is not a JSON
    object or not JSON, another content type)."""
    async with running_lobby(
        redis_url, keys, database_url, tmp_path, **SEATS_FROM_ONE_ADDRESS
    ) as client:
        table = (await client.post("/tables", json={"seats": 2})).json()["id"]
        tokens = [
            (await client.post(f"/tables/{table}/join", json={"name": n})).json()["token"]
            for n in ("A", "B")
        ]
        assert (await client.post(f"/tables/{table}/start", headers=bearer(tokens[0]))).is_success
        legal = f"/games/{table}/legal"
        plain, padded = [
            await client.get(f"{legal}?after_version={v}", headers=bearer(tokens[0]))
            for v in ("0", "00")
        ]
        assert plain.status_code == padded.status_code == 200
        assert plain.content == padded.content
        assert plain.headers["content-type"] == padded.headers["content-type"]
        seat = 0 if plain.json()["legal_commands"] else 1
        mover = bearer(tokens[seat])
        if seat:
            plain = await client.get(legal, headers=mover)
        command = plain.json()["legal_commands"][0]
        moved = await client.post(
            f"/games/{table}/commands?legal=1&other=x", json=command, headers=mover
        )
        assert moved.status_code == 200, moved.json()
        assert moved.json()["legal"]["version"] == moved.json()["version"]
        refused = {
            "get": [f"{legal}?after_version={v}" for v in ("-1", str(10**15 + 1), "x")]
            + ["/games/bad!id/legal", f"{legal}?after_version=1&after_version=x"],
            "post": [(f"/games/{table}/commands?legal=maybe", "application/json", b"{}")]
            + [
                (f"/games/{table}/commands?legal=true", kind, body)
                for kind, body in (
                    ("application/json", b"[1]"),
                    ("application/json", b"{"),
                    ("text/plain", b"{}"),
                )
            ],
        }
        for path in refused["get"]:
            answer = await client.get(path, headers=mover)
            assert answer.status_code == 422, (path, answer.json())
            assert answer.json()["code"] == "invalid_request", (path, answer.json())
        for path, kind, body in refused["post"]:
            headers = {**mover, "content-type": kind}
            answer = await client.post(path, content=body, headers=headers)
            assert answer.status_code == 422, (path, body, answer.json())
            assert answer.json()["code"] == "invalid_request", (path, body, answer.json())


def test_no_route_before_the_lean_ones_takes_their_paths(redis_url: str) -> None:
    """``lean.LeanDispatch`` gives an HTTP move's two routes their requests before the
    router tries any other: that is the router's own choice only while no route it tries
    first (the docs', the catalog's, the tables', the queue's) takes their paths."""
    from fastapi.routing import APIRoute, _IncludedRouter
    from sqlalchemy import create_engine
    from starlette.routing import BaseRoute, Match

    from services.lobby import games, lean
    from services.lobby.app import create_app
    from shared.settings import Settings

    app = create_app(
        Redis.from_url(redis_url), Keys("lean"), create_engine("sqlite://"), Settings()
    )
    assert isinstance(app.router.middleware_stack, lean.LeanDispatch)
    flat: list[BaseRoute] = []
    for route in app.router.routes:
        included = isinstance(route, _IncludedRouter)
        flat.extend(route.original_router.routes if included else [route])
    for method, path, endpoint in (
        ("POST", "/games/t-1/commands", games.send_command),
        ("GET", "/games/t-1/legal", games.get_legal),
    ):
        scope = {"type": "http", "method": method, "path": path, "root_path": ""}
        first = next(r for r in flat if r.matches(scope)[0] == Match.FULL)
        assert isinstance(first, APIRoute) and first.endpoint is endpoint, (path, first)


async def test_the_api_makes_no_spans_of_fastapi_through_a_global_provider(
    redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """FastAPI's own telemetry is off: with a global tracer provider set (as an
    OpenTelemetry auto-instrumentation sets one), no request makes a span of FastAPI's.
    On, FastAPI looked the global providers up on every request (issue 24); Caravel's spans
    are the bus's and the engine's, through a provider of its own (``shared.bus.tracing``)."""
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from sqlalchemy import create_engine

    from services.lobby.app import create_app
    from shared.settings import Settings

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    monkeypatch.setattr(trace, "_TRACER_PROVIDER", provider)
    redis = Redis.from_url(redis_url)
    app = create_app(redis, Keys("spans"), create_engine("sqlite://"), Settings())
    transport = httpx.ASGITransport(app=app)
    try:
        async with httpx.AsyncClient(transport=transport, base_url="http://x") as client:
            assert (await client.get("/games")).status_code == 200
            assert (await client.get("/games/t-1/legal")).status_code == 401
    finally:
        await redis.aclose()
    assert exporter.get_finished_spans() == ()
