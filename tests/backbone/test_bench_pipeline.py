"""`caravel bench pipeline` drives real games through the real bus and engine: a mixed load
plays every registered game."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from shared.games import api

from ..conftest import REDIS_KINDS


@pytest.mark.parametrize("kind", REDIS_KINDS)
def test_a_mixed_load_plays_both_games_through_the_engine(
    kind: str, request: pytest.FixtureRequest
) -> None:
    """``--game mixed`` sends commands of every registered game, game task ``i`` playing
    the ``i``-th game in turn, and the engine answers every one of them (a game it could not
    create would leave its task waiting, and the run failing). The run uses a key namespace
    of its own and deletes it. On the cluster too (its reads: one per stream, no MGET)."""
    redis_url = request.getfixturevalue("redis_url" if kind == "single" else "redis_cluster_url")
    env = {"CARAVEL_REDIS_URL": redis_url, "PATH": "/usr/bin:/bin"}
    args = ["--games", "4", "--players", "2", "--seconds", "1", "--warmup", "0.5", "--json"]
    args += ["--engines", "0", "--partitions", "2"]
    ran = subprocess.run(
        [sys.executable, "-m", "services.cli", "bench", "pipeline", "--game", "mixed", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert ran.returncode == 0, ran.stderr[-2000:]
    figures = json.loads(ran.stdout.strip().splitlines()[-1])
    assert figures["game"] == "+".join(api.names())
    # Every game was created and answered (a short game may end before the measured window).
    assert set(figures["commands_by_game"]) == set(api.names())
    assert sum(figures["commands_by_game"].values()) == figures["commands"]
    assert sum(figures["measured_by_game"].values()) == figures["measured_commands"] > 0
