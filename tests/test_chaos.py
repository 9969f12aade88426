"""The chaos benchmark's short run (``python -m benchmarks.chaos``): services and Redis
killed with ``kill -9`` round-robin for 24 seconds on one Redis, under players over HTTP and
tables of bots; then nothing acknowledged is lost or twice in a log, no move was refused
wrongly, no game or table is stuck, no HTTP 5xx but 503, and the logs and scoring agree
with their replays.

Each run starts its own ``redis-server`` processes on free ports (the shared Redis is never
touched) and stops every process it started, also when it fails."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from benchmarks.chaos import Options, kinds_for, run, table
from benchmarks.chaos_faults import Kill, Services, SingleRedis, until_ping
from benchmarks.chaos_timings import Timed, request_windows, route_of, seconds_around
from services.capacity import free_port, server_env
from tests.cluster import ephemeral_ports, redis_refusing_groups, redis_server

from .conftest import missing_program


@pytest.fixture
def single_redis() -> Iterator[SingleRedis]:
    """A ``redis-server`` of the test's own, as the benchmark starts it."""
    server = redis_server()
    if server is None:
        missing_program("redis-server", "redis-server 7 or later (/usr/bin/redis-server)")
    redis = SingleRedis(server).start()
    try:
        yield redis
    finally:
        redis.stop()


async def test_a_service_started_again_finds_its_port_free(
    single_redis: SingleRedis, tmp_path: Path
) -> None:
    """The failed drill CI saw once ("ai-0 not serving 180 s after its start"): the benchmark
    gave the bot process a port of the kernel's ephemeral range, and while the process was
    down (killed, then 20 s importing on a loaded machine) one of the many outgoing
    connections of the run got that port as its own (or still held it in TIME_WAIT, 60 s
    after it closed). The new process found its port taken: no probes, never serving. The
    kernel may give any port of that range to an outgoing connection, so this test takes the
    port as one would whenever the kernel could have; the benchmark's ports are outside the
    range, and the process serves."""
    env = server_env(free_port(), "cvchaos", secret="chaos-" + "s" * 32)  # a port it leaves
    env.update(CARAVEL_REDIS_URL=single_redis.url, CARAVEL_DATABASE_URL="sqlite://")
    services = Services(env, tmp_path)
    port = services.port("ai", 0)
    low, high = ephemeral_ports()
    held = socket.socket()
    try:
        if low <= port <= high:  # an outgoing connection's, to Redis
            await until_ping(single_redis.url)
            held.bind(("127.0.0.1", port))
            held.connect(("127.0.0.1", single_redis.port))
        services.start("ai", 0)
        await services.started("ai", 0)
    finally:
        services.stop()
        held.close()


async def test_a_process_whose_loop_died_is_named_among_the_dead_loops(tmp_path: Path) -> None:
    """The run's watch of its processes (``Services.probe``): `caravel scoring` against a
    Redis whose user may not run ``XGROUP`` (scoring's start is refused for good) exits 1
    naming its dead loop, and the watch counts that process, not killed, among the dead
    loops with the loop's name and error (before, only a drill's first ``/livez`` of a
    restarted process was looked at, and the run's end saw an exit)."""
    async with redis_refusing_groups() as url:
        env = server_env(free_port(), "cvdead", secret="chaos-" + "s" * 32)
        env.update(CARAVEL_REDIS_URL=url, CARAVEL_DATABASE_URL=f"sqlite:///{tmp_path / 'c.db'}")
        services = Services(env, tmp_path)
        try:
            services.start("scoring", 0)
            await asyncio.to_thread(services.processes["scoring", 0].wait, 90)
            async with httpx.AsyncClient(timeout=2) as client:
                await services.probe(client, f"http://127.0.0.1:{free_port()}")  # no lobby
        finally:
            services.stop()
    assert list(services.dead) == ["scoring-0#1"], services.dead
    assert "scoring: ResponseError" in services.dead["scoring-0#1"], services.dead


# One Redis only: the cluster with durability is an open finding of issue 25 (see
# benchmarks/README.md, "Chaos (issue 25)": under repeated master and replica kills the
# shards stalled), measured by `python -m benchmarks.chaos --redis cluster`, not asserted.
async def test_nothing_is_lost_duplicated_refused_or_stuck_under_kills() -> None:
    if redis_server() is None:
        missing_program("redis-server", "redis-server 7 or later (/usr/bin/redis-server)")
    # The settle and stillness are ceilings: on a quiet machine the players finish their
    # games well within them; on one loaded 15 times over (a restart: 60-80 s) they did not.
    # appendfsync always, as deploy/redis.conf: with everysec a kill of Redis during a slow
    # fsync may lose acknowledged writes, which no service can bring back (stop 44's drills).
    options = Options(
        redis="single",
        fsync="always",
        minutes=0.4,
        interval_s=1.5,
        humans=2,
        bot_tables=2,
        settle_s=150,
        still_s=60,
    )
    report = await run(options)
    shown = table(report)
    assert set(report.kills) == set(kinds_for(options)), shown  # every kind was killed
    assert report.acked > 0 and report.verdict.finished > 0, shown
    assert report.failures() == dict.fromkeys(report.failures(), 0), shown


def test_timings_put_each_request_on_its_games_shard_in_its_window_from_a_kill() -> None:
    """``--timings``: a request is put on its game's shard (the hit one or the healthy
    ones) and in the window of seconds from each node kill its start falls in; a request
    naming no game (``GET /tables``) is left out, and each shard's events are counted
    second by second around the kill."""
    kill = Kill("master", 1000.0, shard=1)
    timed = [
        Timed(1000.5, 0.3, "POST", *route_of("/games/g-a/commands"), 200),
        Timed(1000.6, 0.1, "GET", *route_of("/games/g-b/legal?after_version=3"), 200),
        Timed(1001.5, 0.2, "GET", *route_of("/tables?status=open"), 200),
        Timed(990.0, 0.01, "GET", *route_of("/tables/g-a"), 200),
    ]
    assert route_of("/games/g-b/legal?after_version=3") == ("/games/{id}/legal", "g-b")
    assert route_of("/tables") == ("/tables", None)
    [row] = request_windows(timed, [kill], {"g-a": 0, "g-b": 1}.__getitem__)
    assert row["0..1"]["healthy"]["n"] == 1 and row["0..1"]["healthy"]["p50"] == 0.3
    assert row["0..1"]["hit"]["n"] == 1 and row["0..1"]["hit"]["p50"] == 0.1
    assert row["-6..-0.5"]["healthy"]["n"] == 0 and row["1..2"]["healthy"]["n"] == 0
    [around] = seconds_around({0: [997.5, 1000.2, 1000.7], 1: [1002.1]}, [kill], 2)
    assert around["counts"][0][:5] == [1, 0, 0, 2, 0]  # the seconds -3 to 1 from the kill
    assert around["counts"][1][5] == 1
