"""The engine on a real Redis that fails under it: lost connections, lost data, lost leases."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import httpx
import structlog
from fastapi import FastAPI
from redis.asyncio import Redis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

from services.engine import Engine
from services.engine.worker import GROUP
from services.health import Health, operations_routes
from shared.bus import CommandSender, Delivery, Keys, connect
from shared.contracts import CommandEnvelope

from .helpers import (
    create_game,
    play_locally,
    read_as,
    running_engine,
    same_partition,
    settings_for,
    wait_for,
)

NO_RETRY = Retry(NoBackoff(), 0)  # errors reach the engine's loop at once, not after retries


async def _kill_connections(redis: Redis, name: str) -> int:
    """Close every connection of the clients called ``name`` (as a Redis restart would)."""
    ids = [c["id"] for c in await redis.client_list() if c.get("name") == name]
    for client_id in ids:
        await redis.client_kill_filter(_id=client_id)
    return len(ids)


async def test_the_engine_serves_again_after_redis_cut_its_connections(
    redis: Redis, redis_url: str, keys: Keys
) -> None:
    """Redis drops the engine's connections while it runs (a restart, a failover, a cut
    network): the engine logs the failed round, backs off and carries on, so a command sent
    afterwards is answered.

    Connections are cut, with commands flowing, until a cut has failed a round or a batch
    (a cut between two commands fails nothing: the pool reconnects unseen): a fixed number
    of cuts, as before, sometimes missed every command on a loaded machine."""
    name = f"{keys.prefix}-engine"
    engine_redis = connect(redis_url, client_name=name, retry=NO_RETRY)
    sender = CommandSender(redis, keys)
    try:
        # The engine logs the failed round with its traceback: kept, not rendered. The
        # test's console renderer held this process's event loop 7.5 s for it on a loaded
        # machine (1 s of CPU), and the test's own CLIENT KILL, answered meanwhile, timed
        # out at its client's 5 s (the hunt for flaky tests of stop 47).
        with structlog.testing.capture_logs():
            async with running_engine(engine_redis, keys) as engine:
                assert (await sender.execute(create_game("g-cut-1"))).status == "accepted"

                cut = 0
                while not engine.stats["round_errors"]:
                    assert cut < 2000, "no cut ever failed a round"
                    await sender.send(create_game(f"g-busy-{cut}"))  # work in flight
                    await _kill_connections(redis, name)
                    cut += 1
                    await asyncio.sleep(0.01)
                result = await sender.execute(create_game("g-cut-2"), timeout_s=30)
                assert result.status == "accepted"

                async def reclaimed() -> bool:  # every held partition, after the failure
                    return not engine.fresh

                await wait_for(reclaimed)
    finally:
        await engine_redis.aclose()


async def test_the_engine_makes_its_group_again_when_redis_lost_it(
    any_redis: Redis, keys: Keys
) -> None:
    """A Redis restarted without its data has lost the consumer groups: the engine makes its
    group again (from the stream's start) instead of failing every round."""
    first, second = same_partition(keys, "g-lost", 2)
    sender = CommandSender(any_redis, keys)
    async with running_engine(any_redis, keys):
        assert (await sender.execute(create_game(first))).status == "accepted"
        await any_redis.delete(keys.commands(keys.partition(first)))  # the stream and its group
        result = await sender.execute(create_game(second), timeout_s=10)
        assert result.status == "accepted"


async def test_liveness_fails_when_a_service_loop_died(redis: Redis) -> None:
    """A service loop that ended with an error (here one raising what a lost Redis raises)
    makes /livez answer 503 naming it and its error, so the orchestrator restarts the
    process; while its loops run, /livez is 200. (An engine or a scoring service started
    while Redis is away no longer ends so: it waits, tests/scoring/test_restart.py.)"""

    async def engine() -> None:
        raise ConnectionError("Error 111 connecting to 127.0.0.1:1")

    stop = asyncio.Event()
    dead = asyncio.create_task(engine(), name="engine")
    alive = asyncio.create_task(stop.wait(), name="ai")
    await asyncio.wait([dead], timeout=10)
    try:
        answer = await _livez(Health(redis, None, [alive, dead]))
        assert (await _livez(Health(redis, None, [alive]))).status_code == 200
    finally:
        stop.set()
        await alive
    assert answer.status_code == 503
    body = answer.json()
    assert body["code"] == "loop_died" and body["message"].startswith("engine: ")
    assert "ConnectionError" in body["message"]


async def _livez(health: Health) -> httpx.Response:
    app = FastAPI()
    app.include_router(operations_routes(health))
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://caravel") as client:
        return await client.get("/livez")


async def _serve(engine: Engine, sender: CommandSender, command: CommandEnvelope) -> None:
    """What the engine's loop does until ``command`` is answered: follow the partitions
    it holds (a fresh one's pending entries first); then it stops reading."""
    await engine.follow()

    async def answered() -> bool:
        return (
            await sender.result(command.game_id, command.command_id, seat=command.seat) is not None
        )

    try:
        await wait_for(answered)
    finally:
        await engine.consumer.close()


async def test_a_batch_read_before_the_lease_was_lost_is_left_to_the_new_owner(
    any_redis: Redis, keys: Keys
) -> None:
    """Engine A reads a batch, loses the partition's lease (B takes it) before handling it,
    then gets the partition back: A leaves that batch pending for B instead of handling it
    and caching the game, and after B's moves A decides on the game as it is, not on what
    it cached before (which would reject a legal move out of turn)."""
    game_id = "g-lease"
    commands, _ = play_locally(game_id, players=3, seed=1, limit=3)
    create, first, second, third = commands
    assert second.seat != third.seat  # so a state missing `second` refuses `third`
    p = keys.partition(game_id)
    sender = CommandSender(any_redis, keys)
    a = Engine(any_redis, settings_for(keys), keys, engine_id="engine-a")
    await a.start()
    await a.rebalance()
    await sender.send(create)
    await _serve(a, sender, create)
    await sender.send(first)
    batch = await read_as(any_redis, GROUP, a.id, keys.commands(p), 10)
    await any_redis.set(keys.lease(p), "engine-b")  # A's lease expired and B took it
    await a.rebalance()
    assert p not in a.held
    await a.handle(batch)
    assert game_id not in a.games  # nothing cached for a partition A does not hold
    pending = await any_redis.xpending(keys.commands(p), "engine")
    assert pending["pending"] == 1  # `first` is left for the new owner

    b = Engine(any_redis, settings_for(keys), keys, engine_id="engine-b")
    await b.start()
    b.held, b.fresh = {p}, {p}
    await sender.send(second)
    await _serve(b, sender, second)
    await any_redis.delete(keys.lease(p))  # B goes away; A takes the partition back
    await a.rebalance()
    assert p in a.held
    await sender.send(third)
    await _serve(a, sender, third)
    for engine in (a, b):
        await engine.broker.stop()

    for command in (create, first, second, third):
        result = await sender.result(game_id, command.command_id, seat=command.seat)
        assert result is not None and result.status == "accepted", (command.type, result)
    assert await a.store.version(game_id) == result.version


async def test_a_lease_lost_while_reclaiming_stops_the_reclaim(
    any_redis: Redis, keys: Keys
) -> None:
    """The lease loop finds the partition's lease gone while the engine reclaims its pending
    commands batch by batch: the engine stops reclaiming there, leaving the rest pending for
    the new owner, instead of claiming them again and again until they are dead-lettered."""
    game_id = "g-reclaim"
    p = keys.partition(game_id)

    class LosesTheLease(Engine):
        async def handle(self, deliveries: Sequence[Delivery], attempt: int = 0) -> None:
            await super().handle(deliveries, attempt)
            self._drop(p)  # what the lease loop does when it finds the lease gone

    commands, _ = play_locally(game_id, players=2, seed=3, limit=5)
    sender = CommandSender(any_redis, keys)
    engine = LosesTheLease(any_redis, settings_for(keys, batch_size=2), keys)
    await engine.start()
    for command in commands:
        await sender.send(command)
    await read_as(
        any_redis, GROUP, engine.id, keys.commands(p), 100
    )  # delivered, then left pending
    engine.held, engine.fresh = {p}, {p}
    await asyncio.wait_for(engine.follow(), 10)  # a fresh partition's reclaim, then its reads
    assert not await any_redis.xlen(keys.dead_letters(p))
    pending = await any_redis.xpending(keys.commands(p), "engine")
    assert pending["pending"] == len(commands) - 2  # one batch handled, the rest left
