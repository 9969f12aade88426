"""`caravel up` with no configuration: an embedded Redis under the data folder, the engine
serving every partition, a graceful stop, and the data kept."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import httpx
import psutil

from services.children import terminate
from shared.bus import CommandSender, Keys, connect
from tests.lobby.helpers import free_port

from .helpers import play_locally, wait_for


async def test_caravel_up_serves_games_from_an_embedded_redis(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CARAVEL_")}
    env["CARAVEL_DATA_DIR"] = str(tmp_path / "data")
    env["CARAVEL_HTTP_PORT"] = str(port := free_port())
    up = subprocess.Popen(
        [sys.executable, "-m", "services.cli", "up"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    settings_file = tmp_path / "data" / "redis.db.settings"
    try:

        async def redis_started() -> bool:
            return settings_file.exists()

        await wait_for(redis_started, timeout_s=30)
        socket = json.loads(settings_file.read_text())["unixsocket"]
        redis = connect(f"unix://{socket}")
        sender = CommandSender(redis, Keys())  # the defaults: prefix "cv", 64 partitions
        commands, final = play_locally("g-up", players=2, seed=3, limit=12)
        for command in commands:
            result = await sender.execute(command, timeout_s=30)
            assert result.status == "accepted", result
        assert result.version == final.version
        await redis.aclose()
        docs = httpx.get(f"http://127.0.0.1:{port}/docs", timeout=10)
        assert docs.status_code == 200
        assert _on_uvloop(up.pid)  # the process serving HTTP and WebSockets
    finally:
        assert terminate([up], 30) == [0]  # a graceful stop on SIGTERM
    assert (tmp_path / "data" / "redis.db").stat().st_size > 0  # the log outlives the process
    assert up.stdout is not None
    said = up.stdout.read().decode().splitlines()  # where it serves, its docs, its data
    assert f"Caravel serves  http://127.0.0.1:{port}" in said
    assert f"API docs at     http://127.0.0.1:{port}/docs" in said
    assert f"Data folder     {(tmp_path / 'data').resolve()}" in said


def _on_uvloop(pid: int) -> bool:
    """Whether the process at ``pid`` has loaded uvloop: a server awaited in ``asyncio.run``
    ran on asyncio's own loop whatever uvicorn's ``loop`` setting, and never loaded it."""
    return any("uvloop" in m.path for m in psutil.Process(pid).memory_maps())
