"""Several lobby processes on one host serve one port (``CARAVEL_HTTP_SHARE_PORT``): the
kernel spreads connections between them, and the port stays served while any of them
runs. Without the setting a second lobby finds the port taken and exits."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
from pathlib import Path

import httpx

from services.children import terminate
from shared.bus import Keys

from .helpers import caravel_env, free_port, running_lobby


async def _answers(port: int, requests: int) -> list[int]:
    """The status of ``requests`` health checks, each on a new connection."""
    statuses = []
    for _ in range(requests):
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=10) as client:
            statuses.append((await client.get("/readyz")).status_code)
    return statuses


async def _all_answer(port: int, requests: int) -> list[int]:
    """The statuses of ``requests`` health checks once all are 200 (or the last ones, after
    20 s): processes that share a port are ready one after the other."""
    for _ in range(400):
        statuses = await _answers(port, requests)
        if statuses == [200] * requests:
            break
        await asyncio.sleep(0.05)
    return statuses


async def _ready(port: int, processes: list[subprocess.Popen[bytes]]) -> None:
    for _ in range(400):
        if any(p.poll() is not None for p in processes):
            return
        try:
            if await _answers(port, 1) == [200]:
                return
        except httpx.TransportError:
            pass
        await asyncio.sleep(0.05)


def _listening(port: int) -> int:
    """How many sockets listen on ``port`` (Linux's table of TCP sockets)."""
    rows = Path("/proc/net/tcp").read_text().splitlines()[1:]
    local_and_state = [(row.split()[1], row.split()[3]) for row in rows]
    return sum(
        1 for local, state in local_and_state if state == "0A" and local.endswith(f":{port:04X}")
    )


def _lobby(env: dict[str, str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "services.cli", "lobby"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


async def test_two_lobbies_share_a_port_and_either_one_serves_it_alone(
    redis_url: str, keys: Keys, database_url: str, tmp_path: Path
) -> None:
    port = free_port()

    def env(share: bool) -> dict[str, str]:
        return caravel_env(
            redis_url,
            keys,
            database_url=database_url,
            data_dir=str(tmp_path),
            http_port=str(port),
            http_share_port=str(share).lower(),
        )

    first = _lobby(env(share=True))
    processes = [first]
    try:
        await _ready(port, [first])
        refused = _lobby(env(share=False))  # the port is taken for it
        processes.append(refused)
        assert await asyncio.to_thread(refused.wait, 60) != 0

        second = _lobby(env(share=True))
        processes.append(second)
        for _ in range(400):  # until it binds the port beside the first
            if _listening(port) == 2 or second.poll() is not None:
                break
            await asyncio.sleep(0.05)
        assert _listening(port) == 2
        first.send_signal(signal.SIGKILL)
        await asyncio.to_thread(first.wait, 20)
        await _ready(port, [second])
        assert second.poll() is None  # it started, and serves the port alone now
        assert await _answers(port, 10) == [200] * 10
    finally:
        terminate(processes, 20)


async def test_caravel_up_with_two_lobbies_serves_its_port_from_two_processes(
    redis_url: str, keys: Keys, database_url: str, tmp_path: Path
) -> None:
    """``CARAVEL_PROCESSES=3``: `caravel up` starts a lobby child on its port beside its
    pipeline child (two sockets listen on it), both answer, and stopping `caravel up` stops
    the child too (it waits for it: nothing listens on the port once it has exited)."""
    async with running_lobby(redis_url, keys, database_url, tmp_path, processes="3") as client:
        port = client.base_url.port
        assert port is not None
        for _ in range(600):  # until the child binds the port beside it
            if _listening(port) == 2:
                break
            await asyncio.sleep(0.05)
        assert _listening(port) == 2
        # The parent is ready once its child said it serves (the child binds the port
        # first, and the parent reads the child's word every 0.2 s): until then the
        # parent's answers are 503 "child lobby not ready", as they should be.
        assert await _all_answer(port, 10) == [200] * 10
    assert _listening(port) == 0
