"""`caravel up` over several processes (``CARAVEL_PROCESSES``): the HTTP API in the parent
and a lobby child on its port, the engine, bots, scoring and views in a pipeline child. A
game plays to its end over a seat's WebSocket while the pipeline child is killed (it is
started again), /metrics still shows every service, and a SIGTERM leaves no child behind."""

from __future__ import annotations

import asyncio
import json
import random
import signal
import subprocess
from pathlib import Path
from typing import Any

import httpx
import psutil
import websockets
from redis.asyncio import Redis
from websockets.asyncio.client import ClientConnection

from shared.bus import Keys
from shared.eventstore import EventStore
from shared.games import api

from .helpers import bearer, free_port, start_caravel

PIPELINE = "engine,ai,scoring,views"


def _children(pid: int) -> dict[str, psutil.Process]:
    """The children of the `caravel up` at ``pid``, by the services they run."""
    return {child.cmdline()[-1]: child for child in psutil.Process(pid).children()}


async def _ready(client: httpx.AsyncClient, up: subprocess.Popen[bytes]) -> None:
    """Until `caravel up` answers /readyz with 200 (its children included)."""
    for _ in range(1200):
        assert up.poll() is None, "caravel up exited"
        try:
            if (await client.get("/readyz")).status_code == 200:
                return
        except httpx.TransportError:
            pass
        await asyncio.sleep(0.1)
    raise TimeoutError("caravel up did not become ready")


async def _play(ws: ClientConnection, kill_after: int, kill: Any) -> list[dict[str, Any]]:
    """Play seat 0 over its socket (a random legal command at each decision) until the game
    ends and the socket closes; ``kill()`` once ``kill_after`` moves were accepted. A move
    answered with an error (the engine gone) is sent again with its id: it counts once."""
    rng, frames, accepted, sent = random.Random(7), [], 0, None
    async for message in ws:
        frame = json.loads(message)
        frames.append(frame)
        if frame["type"] == "decision" and frame["seat"] == 0:
            move = {**rng.choice(frame["legal_commands"]), "command_id": f"m-{frame['version']}"}
            sent = {"type": "command", "command": move}
            await ws.send(json.dumps(sent))
        elif frame["type"] == "result":
            accepted += 1
            if accepted == kill_after:
                kill()
        elif frame["type"] == "error" and sent is not None:
            await asyncio.sleep(0.5)
            await ws.send(json.dumps(sent))
    return frames


async def test_caravel_up_on_three_processes_survives_a_killed_child_and_stops_whole(
    redis: Redis, redis_url: str, keys: Keys, database_url: str, tmp_path: Path
) -> None:
    port, own_port = free_port(), free_port()
    up = start_caravel(
        redis_url,
        keys,
        "up",
        database_url=database_url,
        data_dir=str(tmp_path),
        http_port=str(port),
        lease_ttl_ms="1000",
        claim_idle_ms="1000",
        processes="3",
        metrics_port=str(own_port),  # `caravel up`'s own, its HTTP port being shared
    )
    seen: list[psutil.Process] = []
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=30) as client:
            async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{own_port}") as own:
                await _ready(own, up)  # the children too
            first = _children(up.pid)
            seen += first.values()
            assert set(first) == {PIPELINE, "lobby"}
            body = {"seats": 2, "bots": {"1": "random"}, "deadline_s": 3600}
            table = (await client.post("/tables", json=body)).json()
            game = table["id"]
            me = (await client.post(f"/tables/{game}/join", json={"name": "A"})).json()
            started = await client.post(f"/tables/{game}/start", headers=bearer(me["token"]))
            assert started.is_success, started.json()
            url = f"ws://127.0.0.1:{port}/games/{game}/ws?token={me['token']}"
            async with websockets.connect(url) as ws:
                frames = await asyncio.wait_for(_play(ws, 5, first[PIPELINE].kill), 600)
            async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{own_port}") as own:
                await _ready(own, up)  # the pipeline child is back and said so
            again = _children(up.pid)
            seen += again.values()
            metrics = httpx.get(f"http://127.0.0.1:{own_port}/metrics", timeout=30).text
            status = (await client.get(f"/tables/{game}")).json()["status"]
    finally:
        up.send_signal(signal.SIGTERM)
        try:
            returncode = await asyncio.to_thread(up.wait, 60)
        finally:
            if up.poll() is None:
                up.kill()
    assert returncode == 0
    assert again[PIPELINE].pid != first[PIPELINE].pid  # started again
    assert again["lobby"].pid == first["lobby"].pid  # the others left alone
    results = [f for f in frames if f["type"] == "result"]
    assert len(results) > 5  # moves accepted after the kill too
    events = [f for f in frames if f["type"] not in ("decision", "result", "error")]
    assert events[-1]["type"] == api.GAME_ENDED
    last = await EventStore(redis, keys).last_event(game)
    assert last is not None and last.type == api.GAME_ENDED
    assert events[-1]["version"] == last.version
    assert status == "finished"  # scoring and the lobby saw the end
    assert 'process="pipeline"' in metrics and "caravel_commands_total" in metrics
    assert not [p for p in seen if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
