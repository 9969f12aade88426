"""A started service process (`caravel part ...`, what `caravel up` starts in each child):
it imports the modules of the services it runs and no others (issue 25: a restart costs its
imports), and it has frozen its start-up heap out of the garbage collector and raised the
collector's threshold (``services.runtime.tune_collector``)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from services.children import terminate
from services.runtime import COLLECT_AFTER
from shared.bus import Keys
from tests.cluster import redis_refusing_groups
from tests.lobby.helpers import caravel_env, free_port

# `caravel part SERVICES` run in this process; once it says it serves (the readiness pipe of
# a child of `caravel up`), the modules it imported and the collector's state are noted,
# then it is stopped as `caravel up` stops a child (SIGTERM), and they are printed.
STARTED = """
import gc, json, os, signal, sys, threading
from services.cli import app

read, write = os.pipe()
os.environ["CARAVEL_CHILD_READY_FD"] = str(write)
seen = {}

def note_when_serving():
    if os.read(read, 16):
        seen.update(
            modules=sorted(sys.modules),
            frozen=gc.get_freeze_count(),
            threshold=list(gc.get_threshold()),
            hooks=[getattr(hook, "__name__", "") for hook in gc.callbacks],
        )
    os.kill(os.getpid(), signal.SIGTERM)

threading.Thread(target=note_when_serving, daemon=True).start()
app(["part", sys.argv[1]], standalone_mode=False)
print(json.dumps(seen))
"""

LOBBY_ONLY = {  # the HTTP API's modules: imported by a process that serves it, only
    "services.asyncapi",
    "services.lobby.app",
    "services.lobby.games",
    "services.lobby.fanout",
    "services.lobby.tables",
    "services.lobby.lobby",
    "services.lobby.matchmaking",
    "services.lobby.web",
    "services.scoring.http",
}


def started(services: str, redis_url: str, keys: Keys, data: Path) -> dict[str, Any]:
    env = caravel_env(
        redis_url,
        keys,
        data_dir=str(data),
        http_port=str(free_port()),
        http_share_port="true",
        metrics_port="0",
    )
    done = subprocess.run(
        [sys.executable, "-c", STARTED, services],
        env=env,
        capture_output=True,
        timeout=120,
        check=True,
    )
    seen: dict[str, Any] = json.loads(done.stdout.decode().splitlines()[-1])
    assert seen, f"caravel part {services} never served: {done.stderr.decode()[-2000:]}"
    return seen


def services_of(modules: list[str]) -> set[str]:
    """The service packages (engine, lobby, ...) some module of which was imported."""
    return {m.split(".")[1] for m in modules if m.startswith("services.") and m.count(".") >= 2}


@pytest.mark.parametrize(
    ("services", "imported", "not_imported"),
    [
        ("engine", {"engine"}, {"ai", "scoring"}),
        ("engine,ai,scoring,views", {"engine", "ai", "scoring"}, set()),
    ],
)
def test_a_service_process_imports_its_services_only(
    services: str,
    imported: set[str],
    not_imported: set[str],
    redis_url: str,
    keys: Keys,
    tmp_path: Path,
) -> None:
    seen = started(services, redis_url, keys, tmp_path)
    modules = seen["modules"]
    assert imported <= services_of(modules)
    assert not (not_imported & services_of(modules))
    assert not (LOBBY_ONLY & set(modules))


def test_the_lobby_imports_its_http_api(redis_url: str, keys: Keys, tmp_path: Path) -> None:
    """The other side of the test above: the modules it looks for are the lobby's."""
    seen = started("lobby", redis_url, keys, tmp_path)
    assert set(seen["modules"]) >= LOBBY_ONLY


def test_a_started_process_has_tuned_its_collector(
    redis_url: str, keys: Keys, tmp_path: Path
) -> None:
    seen = started("engine", redis_url, keys, tmp_path)
    assert seen["threshold"] == list(COLLECT_AFTER)
    assert seen["frozen"] > 50_000  # the imported modules, classes, functions, schemas


FREEZES = "_freeze_after_a_clean_young_collection"


def test_the_services_child_freezes_its_survivors_and_the_lobby_does_not(
    redis_url: str, keys: Keys, tmp_path: Path
) -> None:
    """The services child of `caravel up` (its young collections free nothing: game states)
    freezes what survives them; the lobby (whose free thousands of cycles) does not."""
    assert FREEZES in started("engine,ai,scoring,views", redis_url, keys, tmp_path)["hooks"]
    assert FREEZES not in started("lobby", redis_url, keys, tmp_path)["hooks"]


async def test_a_process_whose_service_loop_died_exits_so_that_it_is_started_again(
    keys: Keys, tmp_path: Path
) -> None:
    """`caravel part scoring` against a Redis whose user may not run ``XGROUP`` (an access
    list set wrong: scoring's start marks what it has read with ``XGROUP SETID``, refused for
    good, unlike a Redis away, which it waits for). Its scoring loop dies, and the process
    exits 1 naming it, so that what started it starts it again; before, it lived on until
    stopped, its probes its only sign, scoring nothing (issue 25)."""
    async with redis_refusing_groups() as url:
        env = caravel_env(url, keys, data_dir=str(tmp_path), metrics_port="0")
        scoring = subprocess.Popen(
            [sys.executable, "-m", "services.cli", "part", "scoring"],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        try:
            _, errors = await asyncio.to_thread(scoring.communicate, timeout=90)
        except subprocess.TimeoutExpired:
            terminate([scoring])
            pytest.fail("caravel part scoring still ran 90 s after its scoring loop died")
        assert scoring.returncode == 1
        died = [line for line in errors.decode().splitlines() if "a service loop died" in line]
        assert died and "scoring: ResponseError" in died[0] and "run this command" in died[0], (
            errors
        )
