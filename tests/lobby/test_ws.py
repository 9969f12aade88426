"""The per-seat WebSocket: resumable from a version, nothing missed, nothing twice."""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import websockets
from redis.asyncio import Redis
from websockets.asyncio.client import ClientConnection

from shared.bus import Keys
from shared.eventstore import EventStore

from .helpers import bearer, caravel_env, free_port, running_lobby, wait_for_view


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
    got = [m for m in got if m["type"] != "decision"]  # the seat's turns (see below)
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


async def _closed(ws: ClientConnection) -> tuple[int | None, str]:
    """How the server closed ``ws`` (code, reason), after any messages it sent first."""
    with contextlib.suppress(websockets.ConnectionClosed):
        async for _ in ws:
            pass
    return (ws.close_code, ws.close_reason or "")


async def _refusal(url: str, **connect: Any) -> tuple[int | None, str]:
    """How the server closes a socket to ``url`` by itself ((None, "open") if it does not
    within 20 s: a socket it should have refused)."""
    async with websockets.connect(url, **connect) as ws:
        try:
            return await asyncio.wait_for(_closed(ws), 20)
        except TimeoutError:
            return (None, "open")


async def _my_turn(client: httpx.AsyncClient, game_id: str, token: str) -> list[dict[str, Any]]:
    """The seat's legal commands once it has some (a bot may move first)."""
    for _ in range(2000):
        legal = (await client.get(f"/games/{game_id}/legal", headers=bearer(token))).json()
        if legal["legal_commands"]:
            return legal["legal_commands"]  # type: ignore[no-any-return]
        await asyncio.sleep(0.005)
    raise TimeoutError("the seat never had a decision")


async def test_sockets_past_the_caps_are_refused_and_the_engine_keeps_answering(
    redis: Redis, redis_url: str, keys: Keys, database_url: str, tmp_path: Path
) -> None:
    """With 3 sockets per client and 5 in all, a client's 4th socket and the lobby's 6th are
    closed at once with a reason (4429, 4503); the open ones stream, and a command is still
    answered meanwhile. A socket given back makes room again."""
    limits = {"ws_max_per_client": "3", "ws_max_total": "5"}
    async with running_lobby(redis_url, keys, database_url, tmp_path, **limits) as client:
        body = {"seats": 2, "bots": {"1": "greedy"}, "deadline_s": 3600}
        table = (await client.post("/tables", json=body)).json()
        me = (await client.post(f"/tables/{table['id']}/join", json={"name": "A"})).json()
        await client.post(f"/tables/{table['id']}/start", headers=bearer(me["token"]))
        url = f"ws://{client.base_url.host}:{client.base_url.port}/games/{table['id']}/ws"
        async with contextlib.AsyncExitStack() as held:
            for source in ("127.0.0.1",) * 3 + ("127.0.0.2",) * 2:
                ws = await held.enter_async_context(websockets.connect(url, local_addr=(source, 0)))
                assert json.loads(await ws.recv())["type"] == "game_created"  # it streams
            per_client = await _refusal(url, local_addr=("127.0.0.1", 0))
            in_all = await _refusal(url, local_addr=("127.0.0.3", 0))
            command = (await _my_turn(client, table["id"], me["token"]))[0]
            answered = await client.post(
                f"/games/{table['id']}/commands", json=command, headers=bearer(me["token"])
            )
        again = await _refusal(f"{url}?after=999999", local_addr=("127.0.0.3", 0))
    assert per_client[0] == 4429 and per_client[1].startswith("too_many_sockets")
    assert in_all[0] == 4503 and in_all[1].startswith("too_many_sockets")
    assert answered.status_code == 200 and answered.json()["status"] == "accepted"
    assert again[0] == 4400  # served (and refused for its own reason): the slots came back


async def test_a_bad_after_an_unknown_game_and_a_finished_game_close_with_a_reason(
    redis: Redis, redis_url: str, keys: Keys, database_url: str, tmp_path: Path
) -> None:
    """``after`` of -5, 1e23, abc or past the game's version: 4400 bad_after; an unknown
    game: 4404; a finished game followed from its end: closed at once, normally, saying
    the game is over; resumed from an event the log does not have there: 1012."""
    async with running_lobby(redis_url, keys, database_url, tmp_path) as client:
        body = {"seats": 2, "bots": {"1": "greedy"}, "deadline_s": 0.02}
        table = (await client.post("/tables", json=body)).json()
        me = (await client.post(f"/tables/{table['id']}/join", json={"name": "A"})).json()
        await client.post(f"/tables/{table['id']}/start", headers=bearer(me["token"]))
        base = f"ws://{client.base_url.host}:{client.base_url.port}/games"
        url = f"{base}/{table['id']}/ws"
        bad = [await _refusal(f"{url}?after={after}") for after in ("-5", "1e23", "abc", "99999")]
        unknown = await _refusal(f"{base}/no-such-game/ws")
        whole = await _receive(url)  # to the end of the game
        end = whole[-1]["version"]
        at_end = await _refusal(f"{url}?after={end}&event={whole[-1]['event_id']}")
        went_back = await _refusal(f"{url}?after={end}&event=an-event-the-log-lost")
        past_end = await _refusal(f"{url}?after={end + 1}")
    assert [code for code, _ in bad] == [4400] * 4
    assert all(reason.startswith("bad_after: ") for _, reason in bad)
    assert "past the game's version" in bad[3][1]
    assert unknown[0] == 4404 and unknown[1].startswith("unknown_game")
    assert whole[-1]["type"] == "game_ended"
    assert at_end == (1000, "game_over")
    assert went_back == (1012, "log_went_back: read the game again")
    assert past_end[0] == 4400


async def _until_decision(ws: ClientConnection, events: list[dict[str, Any]]) -> dict[str, Any]:
    """The next decision request on ``ws``; the events before it go to ``events``."""
    while True:
        message = json.loads(await asyncio.wait_for(ws.recv(), 30))
        if message["type"] == "decision":
            return message  # type: ignore[no-any-return]
        events.append(message)


async def test_a_seat_is_told_its_turn_with_its_legal_commands_and_deadline(
    redis: Redis, redis_url: str, keys: Keys, database_url: str, tmp_path: Path
) -> None:
    """A seat's socket sends its decision request when one is due, after the events of its
    version: kind, deadline and the legal commands GET /legal gives. Played, the next one
    comes at a later version; a socket opened while one is due gets it first."""
    async with running_lobby(redis_url, keys, database_url, tmp_path) as client:
        body = {"seats": 2, "bots": {"1": "greedy"}, "deadline_s": 3600}
        table = (await client.post("/tables", json=body)).json()
        me = (await client.post(f"/tables/{table['id']}/join", json={"name": "A"})).json()
        await client.post(f"/tables/{table['id']}/start", headers=bearer(me["token"]))
        base = f"ws://{client.base_url.host}:{client.base_url.port}/games/{table['id']}/ws"
        events: list[dict[str, Any]] = []
        async with websockets.connect(f"{base}?token={me['token']}") as ws:
            first = await _until_decision(ws, events)
            before_first = [e["version"] for e in events]
            view = await wait_for_view(client, table["id"], me["token"], first["version"])
            played = await client.post(
                f"/games/{table['id']}/commands",
                json=first["legal_commands"][0],
                headers=bearer(me["token"]),
            )
            second = await _until_decision(ws, events)
            before_second = [e["version"] for e in events]
        resume = f"{base}?token={me['token']}&after={second['version']}"
        async with websockets.connect(resume) as ws:
            again = json.loads(await asyncio.wait_for(ws.recv(), 30))
        spectator_events: list[dict[str, Any]] = []
        async with websockets.connect(f"{base}?after={second['version'] - 1}") as ws:
            spectator_events.append(json.loads(await asyncio.wait_for(ws.recv(), 30)))
            with contextlib.suppress(TimeoutError):
                spectator_events.append(json.loads(await asyncio.wait_for(ws.recv(), 1)))
    log = await EventStore(redis, keys).read(table["id"])
    mine = [e.version for e in log if e.visibility in ("public", 0)]
    assert (first["seat"], first["game_id"]) == (0, table["id"])
    assert before_first == [v for v in mine if v <= first["version"]]  # its events came first
    assert before_second == [v for v in mine if v <= second["version"]]
    assert isinstance(first["kind"], str) and first["kind"]
    assert datetime.fromisoformat(first["deadline"]) > datetime.now(UTC) + timedelta(minutes=50)
    assert view["version"] == first["version"]
    assert first["legal_commands"] == view["legal_commands"]
    assert played.status_code == 200, played.json()
    assert second["version"] > first["version"] and second["seat"] == 0
    assert again == second
    # A spectator may be told whose turn it is and until when, never the seat's moves.
    assert all(m["type"] != "decision" or m["legal_commands"] == [] for m in spectator_events)


async def test_a_socket_opened_before_the_engine_made_the_game_follows_it_from_the_start(
    redis: Redis, redis_url: str, keys: Keys, database_url: str, tmp_path: Path
) -> None:
    """A client opens its socket as soon as its table is started. The lobby has seated the
    players but no engine has created the game yet (none runs here): the socket is not
    refused as an unknown game, and once an engine comes and creates it, the socket gets the
    game from its first event. A game nobody started is still refused (4404)."""
    async with running_lobby(
        redis_url, keys, database_url, tmp_path, command="lobby", command_timeout_s="1"
    ) as client:
        body = {"seats": 2, "bots": {"1": "random"}}
        table = (await client.post("/tables", json=body)).json()
        me = (await client.post(f"/tables/{table['id']}/join", json={"name": "A"})).json()
        started = await client.post(f"/tables/{table['id']}/start", headers=bearer(me["token"]))
        assert started.status_code == 503  # no engine answered: the command stays queued
        assert await EventStore(redis, keys).read(table["id"]) == []
        base = f"ws://{client.base_url.host}:{client.base_url.port}/games"
        assert await _receive_close(f"{base}/no-such-table/ws") == 4404
        async with websockets.connect(f"{base}/{table['id']}/ws?token={me['token']}") as ws:
            engine = subprocess.Popen(
                [sys.executable, "-m", "services.cli", "engine"],
                env=caravel_env(redis_url, keys, metrics_port="0", lease_ttl_ms="1000"),
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            try:
                first = json.loads(await asyncio.wait_for(ws.recv(), timeout=60))
            finally:
                engine.terminate()
                engine.wait(timeout=30)
    assert (first["type"], first["version"]) == ("game_created", 1)


async def test_a_stop_with_sockets_open_closes_the_http_server_and_the_brokers_together(
    redis: Redis, redis_url: str, keys: Keys, database_url: str, tmp_path: Path
) -> None:
    """SIGTERM while a WebSocket follows a game (the fan-out's subscribers read): the app's
    one shutdown path stops the server, the subscribers and the lobby's brokers, and the
    process exits 0 in time, with nothing logged at warning or above but the stop itself."""
    port = free_port()
    env = caravel_env(
        redis_url, keys, database_url=database_url, data_dir=str(tmp_path), http_port=str(port)
    )
    log = (tmp_path / "stderr.log").open("w+")
    process = subprocess.Popen(
        [sys.executable, "-m", "services.cli", "up"], env=env, stdout=subprocess.DEVNULL, stderr=log
    )
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=30) as client:
            for _ in range(300):
                with contextlib.suppress(httpx.TransportError):
                    if (await client.get("/readyz")).status_code == 200:
                        break
                await asyncio.sleep(0.05)
            game = await client.post("/tables", json={"seats": 2, "bots": {"1": "random"}})
            game_id = game.json()["id"]
            token = (await client.post(f"/tables/{game_id}/join", json={"name": "A"})).json()
            await client.post(f"/tables/{game_id}/start", headers=bearer(token["token"]))
            await wait_for_view(client, game_id, token["token"], 1)
        url = f"ws://127.0.0.1:{port}/games/{game_id}/ws"
        async with websockets.connect(url) as ws:
            await asyncio.wait_for(ws.recv(), 10)  # the fan-out follows the partitions now
            process.send_signal(signal.SIGTERM)
            returncode = await asyncio.to_thread(process.wait, 20)
    finally:
        if process.poll() is None:
            process.kill()
    log.seek(0)
    lines = [json.loads(line) for line in log if line.startswith("{")]
    assert returncode == 0, lines
    loud = [line for line in lines if line.get("level") in ("warning", "error", "critical")]
    assert not loud, loud
