"""A started service process (`caravel part ...`, what `caravel up` starts in each child):
it imports the modules of the services it runs and no others (issue 25: a restart costs its
imports), and it has frozen its start-up heap out of the garbage collector and raised the
collector's threshold (``services.runtime.tune_collector``)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from services.runtime import COLLECT_AFTER
from shared.bus import Keys
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
