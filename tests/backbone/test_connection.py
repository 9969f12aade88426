"""``CARAVEL_REDIS_URL`` naming a Redis Cluster: the client the services get from it."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import uvloop
from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster
from redis.crc import key_slot
from redis.exceptions import ConnectionError, MovedError, ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

from services.capacity import free_port
from shared.bus import Keys, connect, delete_namespace, ensure_group
from shared.bus.connection import (
    CLUSTER_SOCKET_TIMEOUT_S,
    HiredisConnection,
    WaitingPool,
    round_trip,
)
from shared.bus.faults import transient
from shared.bus.scripts import Library, call
from tests.cluster import LocalCluster

from .helpers import wait_for
from .test_slot_migration import move_slot


async def test_a_cluster_url_gives_a_cluster_client_of_its_nodes_packing_with_hiredis() -> None:
    client: Any = connect("redis+cluster://u%40x:p%3Aw@node-a:7000,node-b:7001")
    assert isinstance(client, RedisCluster)
    assert [(n.host, n.port) for n in client.startup_nodes] == [("node-a", 7000), ("node-b", 7001)]
    assert all(n.connection_class is HiredisConnection for n in client.startup_nodes)
    kwargs = client.connection_kwargs
    assert kwargs["connection_class"] is HiredisConnection  # nodes found later too
    assert kwargs["socket_timeout"] == CLUSTER_SOCKET_TIMEOUT_S > 10  # above the longest wait
    assert (kwargs["username"], kwargs["password"]) == ("u@x", "p:w")
    await client.aclose()


@pytest.mark.parametrize(
    "url",
    ["redis+cluster://node-a:7000/2", "redis+cluster://node-a", "redis+cluster://a:1,:2"],
)
def test_a_cluster_url_names_host_port_nodes_only(url: str) -> None:
    with pytest.raises(ValueError, match="cluster"):
        connect(url)


async def test_the_cluster_answers_for_keys_of_every_slot(redis_cluster_url: str) -> None:
    client = connect(redis_cluster_url)
    try:
        key = "cvt-connection:{%d}:probe"
        for p in range(64):
            await client.set(key % p, p, ex=60)
        assert [int(await client.get(key % p) or -1) for p in range(64)] == list(range(64))
        await client.delete(*[key % p for p in range(64)])
    finally:
        await client.aclose()


async def _getkeys_calls(client: Any) -> int:
    """``COMMAND GETKEYS`` calls every node has answered so far."""
    stats = await client.info("commandstats", target_nodes=RedisCluster.ALL_NODES)
    return sum(s.get("cmdstat_command|getkeys", {}).get("calls", 0) for s in stats.values())


async def test_stream_reads_and_script_calls_go_to_their_node_without_asking_for_keys(
    redis_cluster_url: str, keys: Keys
) -> None:
    """XREAD, XREADGROUP and FCALL name their keys in places that move: redis-py would ask a
    node for them (a round trip before each read); the client finds them itself and sends
    each read to its stream's node."""
    client: Any = connect(redis_cluster_url)
    try:
        streams = [keys.events(p) for p in keys.all_partitions()]
        for s in streams:
            await client.xadd(s, {"n": s})
            await ensure_group(client, s, "g")
        library = Library("getkeys_probe", {"get": "return redis.call('XLEN', KEYS[1])"})
        await call(client, library["get"], [streams[0]], [])  # loads the library
        before = await _getkeys_calls(client)
        for s in streams:
            [[name, [(_, fields)]]] = await client.xread({s: "0"}, count=1)
            assert name.decode() == s and fields == {b"n": s.encode()}
            [[_, read]] = await client.xreadgroup("g", "c", {s: ">"}, count=5, block=10)
            assert len(read) == 1
            assert await call(client, library["get"], [s], []) == 1
        assert await _getkeys_calls(client) == before
        await client.function_delete(library.name)
    finally:
        await delete_namespace(client, keys.prefix)
        await client.aclose()


async def test_commands_are_sent_without_a_task_each_and_large_or_cut_ones_still_go(
    redis: Any, redis_url: str, keys: Keys
) -> None:
    """A command the socket takes at once is sent in the caller's task (redis-py's send
    under its socket timeout made a task per command); a value larger than the socket's
    buffers is waited for and arrives whole; a connection the server cut fails its command,
    and the next one goes on a new connection."""
    loop = asyncio.get_running_loop()
    made = 0
    default = loop.get_task_factory()

    def counting(loop: asyncio.AbstractEventLoop, coro: Any, **kwargs: Any) -> Any:
        nonlocal made
        made += 1
        return default(loop, coro, **kwargs) if default else asyncio.Task(coro, loop=loop, **kwargs)

    await redis.ping()
    loop.set_task_factory(counting)
    try:
        for _ in range(20):
            await redis.ping()
    finally:
        loop.set_task_factory(default)
    assert made == 0
    key = f"{keys.prefix}:large"
    value = b"x" * (16 << 20)
    await redis.set(key, value)
    assert await redis.strlen(key) == len(value)
    before = await redis.client_id()
    other = connect(redis_url)
    await other.client_kill_filter(_id=before)
    await other.aclose()
    with pytest.raises(ConnectionError):  # as redis-py's own send: the cut is told once
        await redis.get(key)
    assert await redis.get(key) == value  # on a new connection
    assert await redis.client_id() != before


async def test_a_waiting_pool_serves_every_caller_on_its_connections_and_wakes_waiters(
    redis_url: str, keys: Keys
) -> None:
    """Callers beyond the pool's connections queue and are served (none fails), on no more
    connections than its size; one waiting while every connection is held by a blocking
    command gets one when they return."""
    client: Any = connect(redis_url, 5.0, max_connections=2)
    other = connect(redis_url)
    pool = client.connection_pool
    assert isinstance(pool, WaitingPool)
    counter, queue = f"{keys.prefix}:counter", f"{keys.prefix}:queue"
    try:
        counts = await asyncio.gather(*(client.incr(counter) for _ in range(100)))
        assert sorted(counts) == list(range(1, 101))
        assert len(pool._available_connections) == 2 and not pool._in_use_connections
        held = [asyncio.ensure_future(client.blpop([queue], timeout=5)) for _ in range(2)]
        waiting = asyncio.ensure_future(client.get(counter))
        while len(pool._in_use_connections) < 2:  # both BLPOPs hold theirs
            await asyncio.sleep(0)
        assert not waiting.done()
        await other.rpush(queue, "a", "b")
        assert sorted(v for _, v in await asyncio.gather(*held)) == [b"a", b"b"]
        assert await waiting == b"100"
        assert len(pool._available_connections) == 2 and not pool._in_use_connections
    finally:
        await other.delete(counter, queue)
        await other.aclose()
        await client.aclose()


def _next_connection(client: Any, key: str) -> Any:
    """The connection ``client``'s next command on ``key`` takes (a free one: it made one)."""
    if isinstance(client, RedisCluster):
        return client.get_node_from_key(key)._free[0]
    return client.connection_pool._available_connections[-1]


def test_a_connection_closed_under_a_send_on_uvloop_fails_as_a_connection_error(
    any_redis_url: str, keys: Keys
) -> None:
    """A command whose connection another task closed while it was taken (redis-py's
    cluster client disconnects a node's connections when one command meets the node away)
    fails as a ``ConnectionError``, which a cluster client retries on a new connection and
    the HTTP API answers 503, and the next command goes on. On uvloop, the services' loop,
    the write raised ``RuntimeError: ... the handler is closed``: a 500 during failovers."""

    async def main() -> list[Any]:
        client: Any = connect(any_redis_url)
        key, outcomes = f"{keys.prefix}:closed", []
        try:
            await client.set(key, "v")
            for _ in range(3):
                _next_connection(client, key)._writer.transport.close()  # as a disconnect does
                try:
                    outcomes.append(await client.get(key))
                except Exception as error:  # what the caller would see
                    outcomes.append(error)
                assert await client.get(key) == b"v"  # and the client goes on
        finally:
            await client.delete(key)
            await client.aclose()
        return outcomes

    for outcome in uvloop.run(main()):
        assert outcome == b"v" or (isinstance(outcome, ConnectionError) and transient(outcome))


async def test_a_slot_map_re_read_keeps_the_connections_of_nodes_that_did_not_change(
    redis_cluster_url: str,
) -> None:
    """Reading the slot map again (after any command met a node away: every 0.5 s of a
    failover) leaves the connections to the nodes it found unchanged as they were: redis-py
    reconnected all of them, to every node, and closed them under the commands in flight."""
    client: Any = connect(redis_cluster_url)
    try:
        await client.initialize()
        masters = client.get_primaries()

        async def ids() -> list[int]:
            return [await client.execute_command("CLIENT ID", target_nodes=m) for m in masters]

        before = await ids()
        for _ in range(3):
            client._initialize, client._slots_read_at = True, float("-inf")
            await client.initialize()
        assert client.get_primaries() == masters
        assert await ids() == before
    finally:
        await client.aclose()


async def test_a_slot_map_re_read_builds_the_map_again_only_once_the_cluster_changed(
    cluster: LocalCluster,
) -> None:
    """A re-read whose CLUSTER SLOTS reply is the one the map was built after builds
    nothing (redis-py walks all 16,384 slots three times in Python at each: while a master
    is away, every 0.5 s in every process, until its replica takes over, for the same map);
    once a slot has moved to another master, the next re-reads build the map again, and the
    slot's commands go to its new master."""
    client: Any = connect(cluster.url)
    try:
        await client.initialize()
        await client._reread(None)  # the reply the map is built after, kept
        built = client.nodes_manager.slots_cache
        for _ in range(3):
            await client._reread(None)
        assert client.nodes_manager.slots_cache is built
        slot = key_slot(b"moved")
        _, target = await move_slot(client, slot)

        async def built_again() -> bool:
            await client._reread(None)
            return client.nodes_manager.get_node_from_slot(slot).port == target

        await wait_for(built_again)
        assert client.nodes_manager.slots_cache is not built
        await client.set("moved", "there")
        node = Redis(host="127.0.0.1", port=target)
        assert await node.get("moved") == b"there"
        await node.aclose()
    finally:
        await client.aclose()


async def test_a_replica_gone_from_the_cluster_builds_no_new_slot_map(
    cluster: LocalCluster,
) -> None:
    """A replica killed drops out of every node's CLUSTER SLOTS reply, but routes none of
    this client's commands (it reads no replica): the re-reads that follow build no new map.
    (Nodes also list a range's replicas in orders of their own: compared whole, the replies
    of the nodes taken in turn made a re-read build the map again nearly every time.)"""
    client: Any = connect(cluster.url)
    try:
        await client.initialize()
        master = client.get_primaries()[0]
        listed = Redis(host=master.host, port=master.port)
        replicas: list[int] = []

        async def replicas_listed() -> bool:
            slots = await listed.execute_command("CLUSTER SLOTS")
            replicas[:] = [int(node[1]) for r in slots for node in r[3:]]
            return bool(replicas)

        async def dropped() -> bool:
            slots = await listed.execute_command("CLUSTER SLOTS")
            return all(int(node[1]) != replicas[0] for r in slots for node in r[3:])

        try:
            await wait_for(replicas_listed, timeout_s=30.0)
            await client._reread(None)
            built = client.nodes_manager.slots_cache
            cluster.kill(replicas[0])
            await wait_for(dropped, timeout_s=30.0)
        finally:
            await listed.aclose()
        for _ in range(5):
            await client._reread(None)
        assert client.nodes_manager.slots_cache is built
    finally:
        await client.aclose()


async def test_a_round_trip_answers_each_command_in_order(any_redis: Any, keys: Keys) -> None:
    """One write, each reply in its command's place; on a cluster too (one slot's keys)."""
    meta, holders = f"{keys.prefix}:{{g}}:meta", f"{keys.prefix}:{{g}}:holders"
    await any_redis.hset(meta, mapping={"version": "3", "over": "0"})
    await any_redis.hset(holders, "1", "h-1")
    commands = [("HGET", holders, "1"), ("HMGET", meta, "version", "over", "pending")]
    assert await round_trip(any_redis, commands) == [b"h-1", [b"3", b"0", None]]
    assert await round_trip(any_redis, [("HGET", holders, "2")]) == [None]


async def test_a_round_trip_meeting_an_error_reply_leaves_no_reply_for_the_next(
    redis: Any, keys: Keys
) -> None:
    """An error reply is raised, and the replies after it do not stay on the connection for
    the next caller to read as its own."""
    listed, kept = f"{keys.prefix}:list", f"{keys.prefix}:hash"
    await redis.rpush(listed, "x")
    await redis.hset(kept, "f", "v")
    with pytest.raises(ResponseError, match="WRONGTYPE"):
        await round_trip(redis, [("HGET", listed, "f"), ("HGET", kept, "f")])
    assert await round_trip(redis, [("HGET", kept, "f"), ("LLEN", listed)]) == [b"v", 1]
    assert await redis.hget(kept, "f") == b"v"


async def test_a_round_trip_meeting_an_error_reply_keeps_its_connection(
    redis: Any, keys: Keys
) -> None:
    """Every reply is read before the error is raised: the connection is in step and goes
    back to its pool, not closed and opened again (the lobby's round trips are on every
    move: a refused read cost a reconnect)."""
    listed = f"{keys.prefix}:list"
    await redis.rpush(listed, "x")
    [before] = await round_trip(redis, [("CLIENT", "ID")])
    with pytest.raises(ResponseError, match="WRONGTYPE"):
        await round_trip(redis, [("HGET", listed, "f"), ("CLIENT", "ID")])
    assert await round_trip(redis, [("CLIENT", "ID"), ("LLEN", listed)]) == [before, 1]


async def test_replies_not_come_within_the_socket_timeout_fail_as_a_timeout_and_close(
    redis_url: str, keys: Keys
) -> None:
    """A reply that does not come within the socket timeout (a Redis that stopped
    answering) fails the read as redis-py's ``TimeoutError`` (transient: a 503), and the
    connection, its reply unread, is closed, not pooled."""
    client = connect(redis_url, socket_timeout=0.2)
    try:
        pool: Any = client.connection_pool
        connection = await pool.get_connection()
        try:
            await connection.send_packed_command(
                connection.pack_commands([("BLPOP", f"{keys.prefix}:nothing", 30)])
            )
            with pytest.raises(RedisTimeoutError) as failed:
                await connection.replies(1)
            assert transient(failed.value)
            assert not connection.is_connected
        finally:
            await pool.release(connection)
        assert await round_trip(client, [("ECHO", "in step")]) == [b"in step"]
    finally:
        await client.aclose()


async def test_a_round_trip_on_a_connection_the_server_cut_is_sent_again(
    redis: Any, redis_url: str, keys: Keys
) -> None:
    """Its commands only read: a connection cut under them (a Redis restarted, a proxy's
    idle timeout) costs the caller nothing but another round trip."""
    kept = f"{keys.prefix}:hash"
    await redis.hset(kept, "f", "v")
    [before] = await round_trip(redis, [("CLIENT", "ID")])
    other = connect(redis_url)
    await other.client_kill_filter(_id=before)
    await other.aclose()
    assert await round_trip(redis, [("HGET", kept, "f")]) == [b"v"]
    [after] = await round_trip(redis, [("CLIENT", "ID")])
    assert after != before


async def test_a_slot_moved_to_a_node_not_there_is_mapped_again_at_the_next_re_read(
    redis_cluster_url: str,
) -> None:
    """A MOVED reply (a resharding's, or a script's error reply spelled so: the fault
    tests') makes redis-py give its slot to the node it names, in this client's map alone;
    a node that is not there then stays in the map, and a re-read that finds the cluster's
    masters unchanged builds nothing (a cluster-wide SCAN met the node refused, CI). The
    next re-read after a MOVED builds the map again from CLUSTER SLOTS."""
    client: Any = connect(redis_cluster_url)
    try:
        await client.initialize()
        await client._reread(None)  # the masters the map is built after, kept
        slot, nowhere = key_slot(b"anywhere"), free_port()
        real = client.nodes_manager.get_node_from_slot(slot).port
        await client.nodes_manager.move_slot(MovedError(f"{slot} 127.0.0.1:{nowhere}"))
        assert client.nodes_manager.get_node_from_slot(slot).port == nowhere
        await client._reread(None)
        assert client.nodes_manager.get_node_from_slot(slot).port == real
        assert nowhere not in {node.port for node in client.get_primaries()}
        async for _ in client.scan_iter(match="no-such-key-*", count=1000):
            pass  # every master answers
    finally:
        await client.aclose()
