"""The chaos benchmark's short run (``python -m benchmarks.chaos``): services and Redis
killed with ``kill -9`` at random for 24 seconds on one Redis, under players over HTTP and
tables of bots; then nothing acknowledged is lost or twice in a log, no move was refused
wrongly, no game or table is stuck, no HTTP 5xx but 503, and the logs and scoring agree
with their replays.

Each run starts its own ``redis-server`` processes on free ports (the shared Redis is never
touched) and stops every process it started, also when it fails."""

from __future__ import annotations

import os

import pytest

from benchmarks.chaos import Options, kinds_for, run, table
from tests.cluster import redis_server

from .conftest import missing_program


# One Redis only: the cluster with durability is an open finding of issue 25 (see
# benchmarks/README.md, "Chaos (issue 25)": under repeated master and replica kills the
# shards stalled), measured by `python -m benchmarks.chaos --redis cluster`, not asserted.
@pytest.mark.skipif(
    os.environ.get("CARAVEL_CHAOS") != "1",
    reason="set CARAVEL_CHAOS=1: out of the default run while a failed drill is open "
    "(a bot process not serving 180 s after its restart, seen once in CI; issue 25)",
)
@pytest.mark.parametrize("mode", ["single"])
async def test_nothing_is_lost_duplicated_refused_or_stuck_under_kills(mode: str) -> None:
    if redis_server() is None:
        missing_program("redis-server", "redis-server 7 or later (/usr/bin/redis-server)")
    options = Options(redis=mode, minutes=0.4, interval_s=1.5, humans=2, bot_tables=2, settle_s=60)
    report = await run(options)
    shown = table(report)
    assert set(report.kills) == set(kinds_for(options)), shown  # every kind was killed
    assert report.acked > 0 and report.verdict.finished > 0, shown
    assert report.failures() == dict.fromkeys(report.failures(), 0), shown
