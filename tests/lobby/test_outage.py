"""The HTTP API while Redis is down, and after: 503s in the error shape, then service again
without a restart. Each test runs a Redis server of its own, to stop and start."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from benchmarks.chaos_faults import until_ping
from shared.bus import Keys, connect

from ..cluster import _free_ports
from .helpers import bearer, caravel_env, free_port, running_lobby, wait_for_view

REDIS_SERVER = "/usr/bin/redis-server"
START_WITHIN_S = 60


class RedisServer:
    """A private ``redis-server`` without persistence, on a fixed port, that a test stops
    and starts again (empty, like a restart that lost its data: the worst case).

    Its port is below the kernel's range of ephemeral ports (``tests.cluster``'s
    ``_free_ports``, as the chaos benchmark's restarted processes): a port of that range,
    free while the server is down, may meanwhile become an outgoing connection's local port
    (the services' reconnects to this very port among them, on a loaded machine many), and
    the restart then could not bind it (the outage test's flake under load)."""

    def __init__(self, folder: Path) -> None:
        self.port = _free_ports(1)[0]
        self.folder = folder
        self.process: subprocess.Popen[bytes] | None = None
        self.url = f"redis://127.0.0.1:{self.port}/0"

    async def start(self) -> None:
        """Start the server and wait until it answers (by a deadline, not a count of pings:
        on a loaded machine a start takes longer than 500 pings' 5 s)."""
        command = [REDIS_SERVER, "--port", str(self.port), "--save", "", "--appendonly", "no"]
        command += ["--dir", str(self.folder)]
        self.process = subprocess.Popen(command, stdout=subprocess.DEVNULL)
        await until_ping(self.url, START_WITHIN_S)

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            self.process.wait(timeout=10)
            self.process = None


@pytest.fixture
async def redis_server(tmp_path: Path) -> AsyncIterator[RedisServer]:
    if not Path(REDIS_SERVER).exists():
        pytest.skip("needs /usr/bin/redis-server")
    server = RedisServer(tmp_path)
    await server.start()
    try:
        yield server
    finally:
        server.stop()


def assert_unavailable(response: httpx.Response, code: str) -> None:
    assert response.status_code == 503, response.text
    assert response.json()["code"] == code and response.json()["message"]


async def test_redis_down_answers_503_then_the_api_recovers_without_a_restart(
    redis_server: RedisServer, database_url: str, tmp_path: Path
) -> None:
    keys = Keys("outage", partitions=2)
    async with running_lobby(redis_server.url, keys, database_url, tmp_path / "up") as client:
        table = (await client.post("/tables", json={"seats": 2, "bots": {"1": "random"}})).json()
        me = (await client.post(f"/tables/{table['id']}/join", json={"name": "Ana"})).json()
        started = await client.post(f"/tables/{table['id']}/start", headers=bearer(me["token"]))
        assert started.status_code == 200, started.text
        view = await wait_for_view(client, table["id"], me["token"], 1)
        move = view["legal_commands"][0] if view["legal_commands"] else {"type": "pass"}

        redis_server.stop()
        game, auth = f"/games/{table['id']}", bearer(me["token"])
        assert_unavailable(await client.get(f"{game}/view", headers=auth), "redis_unavailable")
        assert_unavailable(
            await client.post(f"{game}/commands", json=move, headers=auth),
            "redis_unavailable",
        )
        assert (await client.get("/readyz")).status_code == 503

        await redis_server.start()  # empty: the old game is gone, a new one must work
        table = (await client.post("/tables", json={"seats": 2, "bots": {"1": "random"}})).json()
        me = (await client.post(f"/tables/{table['id']}/join", json={"name": "Bo"})).json()
        started = await client.post(f"/tables/{table['id']}/start", headers=bearer(me["token"]))
        # 202: started, not readable yet (the engine is still coming back); the view follows.
        assert started.status_code in (200, 202) or started.json()["code"] == "engine_unavailable"
        view = await wait_for_view(client, table["id"], me["token"], 1)
        answered = await client.get(f"/games/{table['id']}/legal", headers=bearer(me["token"]))
        assert answered.status_code == 200, answered.text


async def test_a_running_tables_game_that_redis_lost_is_started_again(
    redis_server: RedisServer, database_url: str, tmp_path: Path
) -> None:
    """Redis restarted empty (a crash without persistence) under a running table: SQL has
    it ``running``, Redis nothing of its game. The lobby's look for lost games
    (``CARAVEL_LOST_GAME_CHECK_S``) starts its game again, and its player plays on with
    the seat token they hold (issue 25's chaos drill: such a table never moved again)."""
    keys = Keys("lostgame", partitions=2)
    up = running_lobby(redis_server.url, keys, database_url, tmp_path, lost_game_check_s="1")
    async with up as client:
        table = (await client.post("/tables", json={"seats": 2, "bots": {"1": "random"}})).json()
        me = (await client.post(f"/tables/{table['id']}/join", json={"name": "Ana"})).json()
        started = await client.post(f"/tables/{table['id']}/start", headers=bearer(me["token"]))
        assert started.status_code == 200, started.text
        await wait_for_view(client, table["id"], me["token"], 1)

        redis_server.stop()
        await redis_server.start()  # empty: the game is gone, the table still running
        view = await wait_for_view(client, table["id"], me["token"], 1)
        assert view["seat"] == me["seat"]
        again = (await client.get(f"/tables/{table['id']}")).json()
        assert again["status"] == "running" and again["start_error"] is None


async def test_an_engine_that_does_not_answer_is_a_503_after_the_whole_wait(
    redis_server: RedisServer, database_url: str, tmp_path: Path
) -> None:
    """With no engine, a command waits the lobby's whole command timeout (longer than the
    Redis client's 5 s socket timeout) and is answered 503 engine_unavailable."""
    keys = Keys("no-engine", partitions=2)
    serve = running_lobby(
        redis_server.url, keys, database_url, tmp_path, command="lobby", command_timeout_s="6"
    )
    async with serve as client:
        table = (await client.post("/tables", json={"seats": 2, "bots": {"1": "random"}})).json()
        me = (await client.post(f"/tables/{table['id']}/join", json={"name": "Ana"})).json()
        started = await client.post(f"/tables/{table['id']}/start", headers=bearer(me["token"]))
        assert_unavailable(started, "engine_unavailable")


async def test_writes_refused_for_want_of_replicas_are_503s_then_the_starts_finish(
    redis_server: RedisServer, database_url: str, tmp_path: Path
) -> None:
    """With ``min-replicas-to-write`` and no replica (a replica away, the recommended
    durability), Redis refuses every write with NOREPLICAS: the API answers 503 with
    ``Retry-After``, as for a Redis that is down, never 500. The starts that failed are
    not stranded: a start sent again works, and a table of bots (whose creator got a 503
    and no id) is started by the lobby itself."""
    keys = Keys("noreplicas", partitions=2)
    serve = running_lobby(redis_server.url, keys, database_url, tmp_path, start_retry_s="1")
    async with serve as client:
        table = (await client.post("/tables", json={"seats": 2, "bots": {"1": "random"}})).json()
        me = (await client.post(f"/tables/{table['id']}/join", json={"name": "Ana"})).json()
        start = f"/tables/{table['id']}/start"
        admin = connect(redis_server.url)
        try:
            await admin.config_set("min-replicas-to-write", 1)
            started = await client.post(start, headers=bearer(me["token"]))
            assert_unavailable(started, "redis_unavailable")
            assert started.headers["Retry-After"] == "1"
            bots = {"seats": 2, "bots": {"0": "random", "1": "random"}}
            assert_unavailable(await client.post("/tables", json=bots), "redis_unavailable")
        finally:
            await admin.config_set("min-replicas-to-write", 0)
            await admin.aclose()

        again = await client.post(start, headers=bearer(me["token"]))
        assert again.status_code in (200, 202), again.text  # was 409 table_not_open
        await wait_for_view(client, table["id"], me["token"], 1)
        for _ in range(600):  # the table of bots: started by the reconciler
            running = (await client.get("/tables", params={"status": "running"})).json()
            ids = [t["id"] for t in running if t["id"] != table["id"]]
            if ids and (await client.get(f"/games/{ids[0]}/view")).status_code == 200:
                break
            await asyncio.sleep(0.05)
        else:
            raise AssertionError(f"the table of bots never got its game: {running}")

        redis_server.stop()
        ready = await client.get("/readyz")
        assert ready.status_code == 503 and int(ready.headers["Retry-After"]) >= 1


async def test_a_join_refused_for_want_of_replicas_gives_the_seat_back(
    redis_server: RedisServer, database_url: str, tmp_path: Path
) -> None:
    """A join whose seat is taken in SQL but whose holder Redis refuses to cache
    (NOREPLICAS) answers 503, and gives the seat back: the client's retry gets it (found by
    the chaos benchmark: a 500, then 409 ``name_taken`` for good)."""
    keys = Keys("joinreplicas", partitions=2)
    async with running_lobby(redis_server.url, keys, database_url, tmp_path) as client:
        table = (await client.post("/tables", json={"seats": 2, "bots": {"1": "random"}})).json()
        join = f"/tables/{table['id']}/join"
        admin = connect(redis_server.url)
        try:
            await admin.config_set("min-replicas-to-write", 1)
            assert_unavailable(await client.post(join, json={"name": "Ana"}), "redis_unavailable")
        finally:
            await admin.config_set("min-replicas-to-write", 0)
            await admin.aclose()
        again = await client.post(join, json={"name": "Ana"})
        assert again.status_code == 201, again.text
        assert again.json()["seat"] == 0


async def test_a_first_read_while_the_wants_are_refused_serves_the_view_there_is(
    redis_server: RedisServer, database_url: str, tmp_path: Path
) -> None:
    """A game's first read by a process asks for its views (a write to the wanted views'
    stream); while that stream's shard refuses writes (NOREPLICAS; a master killed
    mid-failover), the read serves the view already projected instead of failing (it was
    a 503 for a view that was there); with no view, it is a 503 to retry."""
    keys = Keys("wantsrefused", partitions=2)
    async with running_lobby(redis_server.url, keys, database_url, tmp_path) as client:
        table = (await client.post("/tables", json={"seats": 2})).json()
        seats = [
            (await client.post(f"/tables/{table['id']}/join", json={"name": name})).json()
            for name in ("Ana", "Bo")
        ]
        started = await client.post(
            f"/tables/{table['id']}/start", headers=bearer(seats[0]["token"])
        )
        assert started.status_code in (200, 202), started.text
        admin = connect(redis_server.url)
        try:
            while not await admin.exists(keys.view(table["id"])):  # projected once, at start
                await asyncio.sleep(0.01)
            await admin.config_set("min-replicas-to-write", 1)
            view = await client.get(f"/games/{table['id']}/view", headers=bearer(seats[1]["token"]))
            assert view.status_code == 200, view.text
            assert view.json()["version"] >= 1
            legal = await client.get(
                f"/games/{table['id']}/legal", headers=bearer(seats[0]["token"])
            )
            assert legal.status_code == 200, legal.text
            unknown = await client.get("/games/no-such-game/view")  # or not projected yet
            assert_unavailable(unknown, "redis_unavailable")
            assert unknown.headers["Retry-After"] == "1"
        finally:
            await admin.config_set("min-replicas-to-write", 0)
            await admin.aclose()


async def test_a_service_started_before_redis_and_sql_waits_for_them(
    tmp_path: Path, database_url: str
) -> None:
    """Started while Redis refuses connections, a service logs what it waits for and
    waits (it exited 1 after its first ping), its readiness saying so; once Redis is there
    it serves. A database that refuses connections is waited for the same way."""
    if not Path(REDIS_SERVER).exists():
        pytest.skip("needs /usr/bin/redis-server")
    server = RedisServer(tmp_path)  # its port chosen, not started yet
    port = free_port()
    env = caravel_env(
        server.url, Keys("late", partitions=2), database_url=database_url,
        data_dir=str(tmp_path), http_port=str(port), log_level="INFO",
    )  # fmt: skip
    logs = tmp_path / "lobby.log"
    process = await _lobby_waiting(env, logs, "waiting for redis")
    try:
        await asyncio.sleep(1)  # a few attempts
        assert process.poll() is None, logs.read_text()
        assert "waiting for redis" in logs.read_text()
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as client:
            waiting = await client.get("/readyz")  # readiness says what it waits for
            assert waiting.status_code == 503 and "waiting for redis" in waiting.text
            assert (await client.get("/livez")).status_code == 200
            await server.start()
            for _ in range(400):
                with contextlib.suppress(httpx.TransportError):
                    if (await client.get("/readyz")).status_code == 200:
                        break
                await asyncio.sleep(0.05)
            else:
                raise AssertionError(f"never ready: {logs.read_text()}")
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=20)
        server.stop()

    refused = f"postgresql+psycopg://nobody@127.0.0.1:{free_port()}/none"
    env = {**env, "CARAVEL_DATABASE_URL": refused, "CARAVEL_REDIS_URL": server.url}
    await server.start()
    process = await _lobby_waiting(env, logs, "waiting for sql")
    try:
        assert process.poll() is None and "waiting for sql" in logs.read_text()
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as client:
            waiting = await client.get("/readyz")
            assert waiting.status_code == 503 and "waiting for sql" in waiting.text
    finally:
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=20) == 0  # a stop while waiting is a clean exit
        server.stop()


async def _lobby_waiting(env: dict[str, str], logs: Path, line: str) -> subprocess.Popen[bytes]:
    """`caravel lobby` started with its output in ``logs``, once it has logged ``line``
    (or after 20 s)."""
    with logs.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "services.cli", "lobby"], env=env, stdout=out, stderr=out
        )
    for _ in range(400):
        if line in logs.read_text():
            break
        await asyncio.sleep(0.05)
    return process
