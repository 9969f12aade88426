"""How a ``Follower`` reads streams without a group (scoring, the lobby's fan-out, view
waits): on one Redis one XREAD takes the new entries of all its streams into one batch; on a
Redis Cluster each stream has a subscriber of its own. Either way each stream is read from
the position it was added at, each entry comes once and in order, a stream removed is read
no more, and a stream set back from inside the handler is read again from there."""

from __future__ import annotations

import asyncio
import signal

import pytest
from redis.asyncio import Redis

from benchmarks.chaos_faults import SingleRedis, until_ping
from shared.bus import Broker, Delivery, Follower, Keys
from shared.bus.connection import is_cluster
from shared.bus.faults import transient
from tests.cluster import redis_server
from tests.conftest import missing_program

from .helpers import wait_for


async def test_a_follower_reads_from_each_position_in_order_and_stops_at_remove(
    any_redis: Redis, keys: Keys
) -> None:
    streams = [keys.events(p) for p in (0, 1, 2)]
    old = await any_redis.xadd(streams[1], {"v": b"old"})  # before its position: never read
    batches: list[list[Delivery]] = []
    release = asyncio.Event()

    async def handle(deliveries: list[Delivery]) -> None:
        batches.append(deliveries)
        if len(batches) == 1:
            await release.wait()  # the other entries are written meanwhile

    broker = Broker(any_redis, readers=len(streams))
    follower = Follower(broker, handle, batch=50)
    await broker.start()

    def got() -> list[tuple[str, str]]:
        return [(d.stream, d.fields[b"v"].decode()) for batch in batches for d in batch]

    async def delivered(count: int) -> bool:
        return len(got()) >= count

    try:
        await follower.add(streams[0], "0-0")
        await follower.add(streams[1], old.decode())
        await any_redis.xadd(streams[0], {"v": "a"})
        await wait_for(lambda: delivered(1))
        await follower.add(streams[2], "0-0")  # added while the first batch is in hand
        for stream, value in zip(streams, "bcd", strict=True):
            await any_redis.xadd(stream, {"v": value})
        await asyncio.sleep(0.3)  # every read that could happen before the release
        release.set()
        await wait_for(lambda: delivered(4))

        await follower.remove(streams[1])
        await any_redis.xadd(streams[1], {"v": "e"})
        await any_redis.xadd(streams[0], {"v": "f"})
        await wait_for(lambda: delivered(5))
        await asyncio.sleep(0.3)  # an entry of the removed stream would come by now
    finally:
        await follower.close()
        await broker.stop()

    assert sorted(got()) == sorted(
        [(streams[0], v) for v in "abf"] + [(streams[1], "c"), (streams[2], "d")]
    )
    assert [v for s, v in got() if s == streams[0]] == ["a", "b", "f"]
    assert follower.streams == []
    if is_cluster(any_redis):
        assert all(len({d.stream for d in batch}) == 1 for batch in batches)
    else:
        assert {d.stream for d in batches[1]} == set(streams)  # one read took all three


async def test_a_stream_set_back_from_the_handler_is_read_again_from_there(
    any_redis: Redis, keys: Keys
) -> None:
    """Scoring's failed batch: the handler rewinds the stream to its checkpoint and the
    same entries come again, the other stream's are not repeated."""
    streams = [keys.events(p) for p in (0, 1)]
    seen: list[tuple[str, str]] = []
    failed = False

    async def handle(deliveries: list[Delivery]) -> None:
        nonlocal failed
        seen.extend((d.stream, d.fields[b"v"].decode()) for d in deliveries)
        if not failed and any(d.stream == streams[1] for d in deliveries):
            failed = True
            follower.rewind(streams[1], "0-0")

    broker = Broker(any_redis, readers=len(streams))
    follower = Follower(broker, handle, batch=50)
    await broker.start()
    try:
        await any_redis.xadd(streams[0], {"v": "a"})
        await any_redis.xadd(streams[1], {"v": "x"})
        await any_redis.xadd(streams[1], {"v": "y"})
        for stream in streams:  # the first read takes both of stream 1's entries
            await follower.add(stream, "0-0")

        async def again() -> bool:
            return [v for s, v in seen if s == streams[1]].count("y") >= 2

        await wait_for(again)
        await asyncio.sleep(0.3)  # a third reading would come by now
    finally:
        await follower.close()
        await broker.stop()

    assert [v for s, v in seen if s == streams[1]] == ["x", "y", "x", "y"]
    assert [v for s, v in seen if s == streams[0]] == ["a"]


async def test_a_follow_started_while_redis_does_not_answer_fails_as_transient() -> None:
    """The chaos run's flake ("scoring differs": whole games never scored): FastStream's
    subscriber start waits 3 s for its read task's first PING and raised the built-in
    ``TimeoutError``, which the services' start retries not (not transient); the scoring
    process started while Redis was slow to answer (restarting, or a loaded machine) lived on
    scoring nothing. Here a Redis of the test's own is stopped (SIGSTOP) under the start."""
    server = redis_server()
    if server is None:
        missing_program("redis-server", "redis-server 7 or later (/usr/bin/redis-server)")
    redis_process = SingleRedis(server).start()
    assert redis_process.process is not None
    try:
        await until_ping(redis_process.url)
        client = Redis.from_url(redis_process.url)
        broker = Broker(client, readers=1)
        follower = Follower(broker, lambda _: asyncio.sleep(0), batch=10)
        await broker.start()
        redis_process.process.send_signal(signal.SIGSTOP)
        try:
            with pytest.raises(Exception) as failed:
                await follower.add("cvtest-stopped:events", "0-0")
            assert transient(failed.value), repr(failed.value)
        finally:
            redis_process.process.send_signal(signal.SIGCONT)
            await follower.close()
            await broker.stop()
            await client.aclose()
    finally:
        redis_process.stop()


async def test_a_start_tried_again_leaves_the_stopped_subscribers_of_the_one_before_stopped(
    any_redis: Redis, keys: Keys
) -> None:
    """A service's start that failed is taken back (its follower closed, its broker
    stopped) and tried again on the same broker. The broker's start starts no subscriber
    of the attempt before: FastStream's started every one it still held (a weak set, where a
    stopped one lingers until a cyclic collection; held here, as that cycle holds it), and
    the old subscriber read beside the new one (on a cluster, every entry handed twice)."""
    stream = keys.events(0)
    before: list[str] = []
    after: list[str] = []

    async def handle_before(deliveries: list[Delivery]) -> None:
        before.extend(d.fields[b"v"].decode() for d in deliveries)

    async def handle_after(deliveries: list[Delivery]) -> None:
        after.extend(d.fields[b"v"].decode() for d in deliveries)

    broker = Broker(any_redis, readers=1)
    await broker.start()
    first = Follower(broker, handle_before, batch=50)
    await first.add(stream, "0-0")
    old = broker.subscribers
    assert old and all(s.running for s in old)
    await any_redis.xadd(stream, {"v": "a"})
    await wait_for(lambda: _has(before, 1))
    await first.close()  # the attempt taken back
    await broker.stop()

    await broker.start()  # the next attempt
    again = Follower(broker, handle_after, batch=50)
    try:
        assert not any(s.running for s in old), "a stopped subscriber was started again"
        await any_redis.xadd(stream, {"v": "b"})
        await again.add(stream, "0-0")
        await any_redis.xadd(stream, {"v": "c"})
        await wait_for(lambda: _has(after, 3))
        await asyncio.sleep(0.3)  # what a stale reader would read meanwhile
        assert (before, after) == (["a"], ["a", "b", "c"])
    finally:
        await again.close()
        await broker.stop()


async def _has(got: list[str], count: int) -> bool:
    return len(got) >= count
