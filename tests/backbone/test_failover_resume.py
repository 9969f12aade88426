"""Issue 25: after a node of a Redis Cluster is killed and comes back (a master: its replica
takes over and it returns as that one's replica; a replica: its master refuses writes, with
durability, until it is back), the games of every partition go on: the engine's leases, its
subscribers, the views projection and the bot player serve every partition again.

A service that starts while a shard refuses writes serves that shard's partitions once it
takes them again. Before, the views projection (and the bot player) subscribed to the
partitions in turn at its start and stopped at the first one whose group could not be made:
the following partitions never had a view written, and their games (the bot player plays
from the views) stopped for good: the chaos benchmark's cluster runs, "view 404"."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import structlog

from services.engine import Engine
from shared.bus import CommandSender, Keys, connect
from shared.contracts import Seats
from shared.contracts.records import BOT_PREFIX, HUMAN
from shared.eventstore import EventStore
from tests.cluster import LocalCluster

from .helpers import create_game, running_engine, wait_for, want_views
from .test_shard_outage import WAIT_S, _advanced, _replica_of, pipeline_running

DEADLINE_S = 0.5  # the human seat's clock: the bot player plays it from its deadlines
ADVANCE = 6  # events each game must add after the faults


async def test_every_partition_goes_on_after_a_master_and_a_replica_come_back(
    cluster: LocalCluster,
) -> None:
    await _on_the_cluster(cluster, _play_through_the_faults)


async def _play_through_the_faults(cluster: LocalCluster, client: Any, keys: Keys) -> None:
    store = EventStore(client, keys)
    sender = CommandSender(client, keys)
    await client.ping()  # the slot map
    games = {
        p: next(f"g{p}x{i}" for i in range(100_000) if keys.partition(f"g{p}x{i}") == p)
        for p in range(keys.partitions)
    }
    seats = Seats({0: HUMAN, 1: f"{BOT_PREFIX}random", 2: f"{BOT_PREFIX}random"}, DEADLINE_S)
    async with pipeline_running(client, keys):
        for game in games.values():
            await client.hset(keys.seats(game), mapping=seats.to_mapping())
            result = await sender.execute(create_game(game), timeout_s=30)
            assert result.status == "accepted", result
        await _advanced(store, dict.fromkeys(games.values(), 0), ADVANCE)

        victim = client.get_node_from_key(keys.commands(0)).port
        cluster.kill(victim)  # its replica takes over; until then its partitions wait
        await asyncio.to_thread(cluster.wait_failover, victim)
        # Every live node knows the new master: restarted empty before, the old one could
        # take its slots back (and lose their data).
        await asyncio.to_thread(cluster.wait_healthy)
        cluster.restart(victim)  # back, as the new master's replica
        await asyncio.to_thread(cluster.wait_healthy)
        master = cluster.master_ports()[1]
        replica = _replica_of(cluster, master)
        before = [cluster.refused_writes(master)]
        cluster.kill(replica)  # its master refuses writes (durability 1) until it is back
        await _refused(cluster, [master], before)  # and the services met that
        cluster.restart(replica)
        await asyncio.to_thread(cluster.wait_healthy)

        at = {g: await _version(store, g) for g in games.values()}
        await _advanced(store, at, ADVANCE)


async def _refused(cluster: LocalCluster, masters: list[int], before: list[int]) -> None:
    """Until each master has refused writes (NOREPLICAS) since it had refused ``before``:
    the services have met the fault (``WAIT_S`` at most), however slow the machine."""

    async def grown() -> bool:
        now = await asyncio.to_thread(lambda: [cluster.refused_writes(m) for m in masters])
        return all(n > b for n, b in zip(now, before, strict=True))

    await wait_for(grown, timeout_s=WAIT_S, every_s=0.1)


async def _version(store: EventStore, game: str) -> int:
    """The game's version, asked again while the client finds its node."""
    for _ in range(100):
        try:
            return await store.version(game)
        except Exception:
            await asyncio.sleep(0.2)
    return await store.version(game)


async def test_the_services_started_during_a_fault_serve_every_partition(
    cluster: LocalCluster,
) -> None:
    await _on_the_cluster(cluster, _start_during_a_fault)


async def _start_during_a_fault(cluster: LocalCluster, client: Any, keys: Keys) -> None:
    """Replicas killed (their masters refuse writes: the groups of their partitions cannot
    be made, the wanted views cannot be trimmed); the engine, the views projection and the
    bot player started; the replicas back; then games of every partition created: every
    game gets its view and moves."""
    store = EventStore(client, keys)
    sender = CommandSender(client, keys)
    await client.ping()  # the slot map
    games = {
        p: next(f"g{p}y{i}" for i in range(100_000) if keys.partition(f"g{p}y{i}") == p)
        for p in range(keys.partitions)
    }
    seats = Seats({0: HUMAN, 1: f"{BOT_PREFIX}random", 2: f"{BOT_PREFIX}random"}, DEADLINE_S)
    # The shard of partition 0, first in the order the services subscribe (its wanted views'
    # stream too, which the views projection reads at its start).
    masters = [client.get_node_from_key(keys.commands(0)).port]
    replicas = [_replica_of(cluster, master) for master in masters]
    before = [cluster.refused_writes(master) for master in masters]
    for replica in replicas:
        cluster.kill(replica)
    async with pipeline_running(client, keys):
        await _refused(cluster, masters, before)  # their start met the shards refusing writes
        for replica in replicas:
            cluster.restart(replica)
        await asyncio.to_thread(cluster.wait_healthy)
        for game in games.values():
            await client.hset(keys.seats(game), mapping=seats.to_mapping())
            result = await sender.execute(create_game(game), timeout_s=30)
            assert result.status == "accepted", result
        await _advanced(store, dict.fromkeys(games.values(), 1), ADVANCE)
        await _viewed(client, keys, list(games.values()))


async def test_an_engine_started_while_every_master_refuses_writes_serves_once_they_take_them(
    cluster: LocalCluster,
) -> None:
    """Every replica killed: every master refuses writes (NOREPLICAS), as each master of a
    cluster just made does for a moment, until it counts its replica as good. The engine
    started then must not end (no group could be made on any stream: it took that for
    Redis away and ended for good, its commands unanswered); once the replicas are back,
    it answers."""
    await _on_the_cluster(cluster, _start_while_no_master_takes_writes)


async def _start_while_no_master_takes_writes(
    cluster: LocalCluster, client: Any, keys: Keys
) -> None:
    sender = CommandSender(client, keys)
    await client.ping()  # the slot map
    replicas = [_replica_of(cluster, master) for master in cluster.master_ports()]
    for replica in replicas:
        cluster.kill(replica)
    async with running_engine(client, keys, durability_replicas=1) as engine:
        await wait_for(lambda: _refused_start(engine))
        for replica in replicas:
            cluster.restart(replica)
        await asyncio.to_thread(cluster.wait_healthy)
        result = await sender.execute(create_game("after-the-fault"), timeout_s=30)
        assert result.status == "accepted", result


async def _refused_start(engine: Engine) -> bool:
    """The engine is past its start (its broker connected), every group refused."""
    return engine.broker.running


async def _viewed(client: Any, keys: Keys, games: list[str]) -> None:
    """Until every game has a view (``WAIT_S`` at most: then fails, naming the others),
    once asked for as a reader of views asks (views are made for the games someone reads)."""
    await want_views(client, keys, *games)
    loop = asyncio.get_running_loop()
    give_up = loop.time() + WAIT_S
    missing = list(games)
    while missing:
        missing = [g for g in missing if not await client.exists(keys.view(g))]
        if missing and loop.time() > give_up:
            raise AssertionError(f"games without a view: {missing}")
        await asyncio.sleep(0.2)


async def _on_the_cluster(
    cluster: LocalCluster, scenario: Callable[[LocalCluster, Any, Keys], Awaitable[None]]
) -> None:
    """Run ``scenario`` on a client of the cluster, in a namespace of 16 partitions of its
    own, its logs captured (a traceback a second on a loaded machine slowed it to failing)."""
    keys = Keys(prefix=f"cvt-{uuid.uuid4().hex[:10]}", partitions=16)
    client: Any = connect(cluster.url)
    with structlog.testing.capture_logs():
        try:
            await scenario(cluster, client, keys)
        finally:
            await client.aclose()
