"""The move-path benchmarks run (a tiny smoke run each; their figures are not checked: speed
is measured in benchmarks/, never asserted): the peers closed loop over WebSockets and over
HTTP, and the live-tables driver of `caravel bench capacity` and the latency benchmark."""

from __future__ import annotations

import asyncio
import gc
import os
import sys
from pathlib import Path

import psutil
import pytest
from redis.asyncio import Redis
from typer.testing import CliRunner
from websockets.asyncio.server import ServerConnection, serve

from services import cli
from services.capacity import Human, Plan, connect, live_tables, parse_settings, server_env
from shared.bus import Keys
from shared.contracts import dump_json

from .helpers import SEATS_FROM_ONE_ADDRESS, running_lobby

sys.path.insert(0, str(Path(__file__).parents[2] / "benchmarks" / "peers"))
import caravel_loop  # a benchmark script's module, beside it


async def test_the_move_path_benchmarks_play_moves(
    redis: Redis, redis_url: str, keys: Keys, database_url: str, tmp_path: Path
) -> None:
    async with running_lobby(
        redis_url, keys, database_url, tmp_path, **SEATS_FROM_ONE_ADDRESS
    ) as client:
        base = str(client.base_url).rstrip("/")
        me = psutil.Process(os.getpid())  # not the server: its CPU is not what is checked
        for mode, lean in (("ws", True), ("http", True), ("http", False)):  # lean: its client
            run = await caravel_loop.closed_loop(
                base, me, mode, tables=2, seconds=1, warmup_s=0.5, lean=lean
            )
            assert run["moves"] > 0 and run["refused"] == 0, run
        plan = Plan(seats=2, humans=2, think=(0.0, 0.05), watch_other=True)
        collector = gc.get_threshold()
        live = await live_tables(base, os.getpid(), 2, 1.0, plan)
        assert live["moves"] > 0 and live["refused"] == live["lost"] == 0, live
        assert live["all_moves"] > 0, live  # every seat's moves, seen on the first socket
        assert live["dropped_sockets"] == 0 and live["driver_loop_lag_ms"] is not None, live
        assert gc.get_threshold() == collector and gc.get_freeze_count() == 0  # given back


async def test_the_capacity_driver_counts_a_socket_dropped_not_one_whose_game_ended() -> None:
    """A human's socket the server closes for another reason than its game's end (its
    Redis pool busy: 1013) is a dropped socket, which fails a capacity run; a socket closed
    after its game's last event is not. Before, both ended the seat's play unnoticed."""
    reasons = iter([(1000, "game_over"), (1013, "redis_unavailable: try again shortly")])

    async def one_event_then_close(ws: ServerConnection) -> None:
        await ws.send(dump_json({"type": "event", "version": 1, "causation_id": "c1"}))
        code, reason = next(reasons)
        await ws.close(code, reason)

    async with serve(one_event_then_close, "127.0.0.1", 0) as server:
        port = next(iter(server.sockets)).getsockname()[1]
        humans = [Human(await connect(f"ws://127.0.0.1:{port}")) for _ in range(2)]
        for human in humans:
            await human.read()
    assert [(h.moves, h.dropped) for h in humans] == [(1, False), (1, True)]


@pytest.mark.parametrize("unix", [False, True], ids=["tcp", "unix"])
def test_the_services_run_apart_play_moves_and_count_each_process(unix: bool) -> None:
    """``run.py --apart``: each service a ``caravel part`` process of its own on a
    redis-server of its own; every one of them and Redis did work in the window. With
    ``--apart-redis unix`` every process reaches that Redis on its unix socket only (it
    listens on no TCP port): ``CARAVEL_REDIS_URL=unix://`` serves every service."""
    tree = str(Path(__file__).parents[2])
    with caravel_loop.caravel_apart(sys.executable, tree, unix) as (base, apart):
        assert apart.redis_url.startswith("unix://" if unix else "redis://127.0.0.1:")
        run = asyncio.run(caravel_loop.closed_loop(base, apart, "ws", 2, 1.5, warmup_s=0.5))
    assert run["moves"] > 0 and run["refused"] == 0, run
    by_process = run["cpu_ms_per_move_by_process"]
    assert set(by_process) == {"engine", "ai", "scoring", "views", "redis"}, run
    assert by_process["engine"] > 0 and by_process["redis"] > 0, run
    parts = run["lobby_cpu_ms_per_move"] + sum(by_process.values())
    assert abs(run["server_cpu_ms_per_move"] - parts) < 0.01, run


def test_a_benchmarks_settings_reach_its_servers_environment_and_a_bad_one_is_named() -> None:
    """`--setting embedded_fsync=everysec` (the latency and capacity benchmarks, to measure
    the durability trade at the same minutes) becomes the server's CARAVEL_EMBEDDED_FSYNC; a
    pair without `=` is refused by name, before any server starts."""
    env = server_env(8000, **parse_settings(["embedded_fsync=everysec", "engine_linger_ms=4"]))
    assert env["CARAVEL_EMBEDDED_FSYNC"] == "everysec"
    assert env["CARAVEL_ENGINE_LINGER_MS"] == "4"
    with pytest.raises(ValueError, match="fsync"):
        parse_settings(["fsync"])
    result = CliRunner().invoke(cli.app, ["bench", "capacity", "--setting", "fsync"])
    assert result.exit_code == 2
    assert "NAME=VALUE" in result.output
