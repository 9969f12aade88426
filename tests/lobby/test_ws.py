"""The per-seat WebSocket: resumable from a version, nothing missed, nothing twice."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import websockets
from redis.asyncio import Redis

from shared.bus import Keys
from shared.eventstore import EventStore

from .helpers import bearer, running_lobby


async def _receive(url: str, stop_after: int | None = None) -> list[dict[str, Any]]:
    got: list[dict[str, Any]] = []
    async with websockets.connect(url) as ws:
        async for message in ws:
            got.append(json.loads(message))
            if stop_after is not None and len(got) >= stop_after:
                break  # drop the connection mid-game
    return got


async def test_a_client_that_reconnects_misses_nothing_and_gets_nothing_twice(
    redis: Redis, redis_url: str, keys: Keys, database_url: str, tmp_path: Path
) -> None:
    """Seat 0 follows a game between a bot and the fallback (its player never moves), drops
    its connection twice and resumes from the last version it got: it receives every event
    it may see, once, in order; a spectator receives the public ones only."""
    async with running_lobby(redis_url, keys, database_url, tmp_path) as client:
        body = {"seats": 2, "bots": {"1": "greedy"}, "deadline_s": 0.02}
        table = (await client.post("/tables", json=body)).json()
        me = (await client.post(f"/tables/{table['id']}/join", json={"name": "A"})).json()
        await client.post(f"/tables/{table['id']}/start", headers=bearer(me["token"]))
        base = f"ws://{client.base_url.host}:{client.base_url.port}/games/{table['id']}/ws"
        got: list[dict[str, Any]] = []
        for stop_after in (40, 150, None):
            after = got[-1]["version"] if got else 0
            got += await _receive(f"{base}?token={me['token']}&after={after}", stop_after)
        spectator = await _receive(base)
        forged = await _receive_close(f"{base}?token=bad.token")
    log = await EventStore(redis, keys).read(table["id"])
    visible = [e.version for e in log if e.visibility in ("public", 0)]
    assert [e["version"] for e in got] == visible
    assert got[-1]["type"] == "game_ended"
    assert [e["version"] for e in spectator] == [e.version for e in log if e.visibility == "public"]
    assert all(e["secret"] is None for e in got + spectator)
    assert forged == 4401


async def _receive_close(url: str) -> int | None:
    try:
        async with websockets.connect(url) as ws:
            await ws.recv()
    except websockets.ConnectionClosed as closed:
        return closed.rcvd.code if closed.rcvd else None
    except websockets.InvalidStatus as refused:
        return refused.response.status_code
    return None
