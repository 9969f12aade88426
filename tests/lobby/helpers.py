"""A whole Caravel for tests: `caravel up` in a process of its own, reached over HTTP."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import Engine
from sqlmodel import Session

from services.children import terminate
from services.lobby.db import LobbySeat, LobbyTable
from shared.bus import Keys

READY_WITHIN_S = 120  # a loaded machine starts a `caravel up` of several processes slowly
VIEW_WITHIN_S = 60  # a view waited for (:func:`wait_for_view`)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def caravel_env(redis_url: str, keys: Keys, **settings: str) -> dict[str, str]:
    """The environment of a `caravel` process on this test's Redis namespace: this
    process's own CARAVEL_* variables dropped, ``settings`` as CARAVEL_<NAME>."""
    return {
        **{k: v for k, v in os.environ.items() if not k.startswith("CARAVEL_")},
        "CARAVEL_REDIS_URL": redis_url,
        "CARAVEL_KEY_PREFIX": keys.prefix,
        "CARAVEL_PARTITIONS": str(keys.partitions),
        "CARAVEL_LOG_LEVEL": "WARNING",
        **{f"CARAVEL_{k.upper()}": v for k, v in settings.items()},
    }


def start_caravel(
    redis_url: str, keys: Keys, command: str = "up", **settings: str
) -> subprocess.Popen[bytes]:
    """`caravel <command>` in a process of its own on this test's Redis namespace
    (``settings`` as in :func:`caravel_env`), its output dropped."""
    return subprocess.Popen(
        [sys.executable, "-m", "services.cli", command],
        env=caravel_env(redis_url, keys, **settings),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


SEATS_FROM_ONE_ADDRESS = {
    "command_rate": "100000",
    "command_burst": "100000",
    "join_rate": "100000",
    "join_burst": "100000",
}
"""The settings of a lobby whose test plays many seats from one address as fast as it
answers (the move path's benchmarks, whole games of several humans): the per-client limits
(20 commands a second after a burst of 100, 5 joins a second after 50) are meant for one
player and are tested on their own (test_limits.py); on uvloop a whole game's moves went
past them."""


@asynccontextmanager
async def running_lobby(
    redis_url: str,
    keys: Keys,
    database_url: str,
    data_dir: Path,
    command: str = "up",
    **settings: str,
) -> AsyncIterator[httpx.AsyncClient]:
    """Run `caravel up` (or another ``command`` that serves the API, such as `lobby`) on this
    test's Redis namespace and database; yield an HTTP client."""
    port = free_port()
    process = start_caravel(
        redis_url,
        keys,
        command,
        database_url=database_url,
        data_dir=str(data_dir),
        http_port=str(port),
        lease_ttl_ms="1000",
        **settings,
    )
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=30) as client:
            deadline = time.monotonic() + READY_WITHIN_S
            while time.monotonic() < deadline:
                try:  # a connection of its own per poll: see `probe`
                    if (await probe(port)).status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                if process.poll() is not None:
                    raise RuntimeError("caravel up exited")
                await asyncio.sleep(0.05)
            else:
                raise TimeoutError(f"caravel {command} not ready in {READY_WITHIN_S} s")
            yield client
    finally:
        terminate([process], 20)


async def probe(port: int) -> httpx.Response:
    """``/readyz`` over a new connection, as an orchestrator's probe: a poll over a kept
    connection accepted by the start-up probes could hang once they gave the port up (seen
    with `caravel lobby` beside `caravel up` on one SQLite file; open on issue 25)."""
    async with httpx.AsyncClient(timeout=5) as once:
        return await once.get(f"http://127.0.0.1:{port}/readyz")


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def wait_for_view(
    client: httpx.AsyncClient, game_id: str, token: str, version: int
) -> dict[str, Any]:
    """The seat's view once the projection has reached ``version``, asked until a deadline
    (``VIEW_WITHIN_S``). Not a count of polls: polls answered at once (404s before the
    engine made the game) spent 2,000 in little more than their 10 s of sleeps, less than a
    `caravel up` may take on a loaded machine to come back from an empty Redis (its groups
    made again, its stopped subscribers revived every ``claim_idle_ms`` / 2)."""
    give_up = time.monotonic() + VIEW_WITHIN_S
    while time.monotonic() < give_up:
        response = await client.get(f"/games/{game_id}/view", headers=bearer(token))
        if response.status_code == 200 and response.json()["version"] >= version:
            return response.json()  # type: ignore[no-any-return]
        await asyncio.sleep(0.005)
    raise TimeoutError(f"the view of {game_id} did not reach version {version}")


def bots_table(db: Engine, table_id: str, status: str = "open", seats: int = 2) -> None:
    """A full table of random bots, written in SQL (``status`` ``running``: started, its
    start done)."""
    with Session(db) as session:
        table = LobbyTable(
            id=table_id, ruleset="standard", options={}, seats=seats, deadline_s=60, status=status
        )
        session.add(table)
        session.flush()
        for seat in range(seats):
            bot = LobbySeat(table_id=table_id, seat=seat, kind="bot", name="b", bot_level="random")
            session.add(bot)
        session.commit()


def table_row(db: Engine, table_id: str) -> LobbyTable:
    """A table's row in SQL."""
    with Session(db) as session:
        row = session.get(LobbyTable, table_id)
        assert row is not None
        return row


async def lose_game(redis: Any, keys: Keys, game_id: str) -> None:
    """Leave in Redis what a Redis that lost a game keeps of it: nothing (its keys, and its
    id among its partition's games: all written after the last write Redis kept). Only
    that game's keys are deleted."""
    p = keys.partition(game_id)
    mine = f"{keys.prefix}:{{{p}}}:*:{game_id}"
    found = [  # its keys, and its answers' (``Keys.result``: the game's id, then a /)
        k for pattern in (mine, f"{mine}/*") async for k in redis.scan_iter(match=pattern)
    ]
    assert found
    await redis.delete(*found)  # one slot: the game's partition
    await redis.srem(keys.games(p), game_id)
