"""Pins what ``shared/bus/faststream_ext.py`` relies on below FastStream's public API: each
test names the FastStream internal it checks, so an upgrade that changes one fails here
with the name to look at, instead of reading nothing or reading wrong in production. The
behaviour on top (one read of several streams, one batch) is tested with real Redis in
test_consumer.py and test_follower.py; here a shared read is driven once, end to end."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import logging
from collections.abc import AsyncIterator
from importlib.metadata import version
from types import SimpleNamespace
from typing import Any, get_args, get_type_hints

import pytest
from faststream.redis import RedisBatchStreamMessage, RedisBroker, StreamSub
from faststream.redis.configs import RedisConnectionState
from faststream.redis.subscriber.usecases import stream_subscriber
from redis.asyncio import Redis

from shared import loops
from shared.bus import Broker, Delivery, GroupConsumer, Keys
from shared.bus import faststream_ext as ext
from shared.bus.consumer import SHARED_BLOCK_MS, ensure_group, follow

from .helpers import wait_for

UPGRADE = "FastStream changed under shared/bus/faststream_ext.py"


def test_the_release_checked_against() -> None:
    """A new minor release may change any internal below: check each, then bump
    ``CHECKED_VERSION``."""
    installed = version("faststream")
    assert installed.startswith(ext.CHECKED_VERSION + "."), (
        f"FastStream {installed} is installed; faststream_ext.py was checked against "
        f"{ext.CHECKED_VERSION}: re-check what this file pins and bump CHECKED_VERSION"
    )


def test_the_stream_batch_subscriber_reads_in_get_msgs_and_hands_on_in_consume_one() -> None:
    """``StreamBatchSubscriber._consume`` loops on ``_get_msgs`` (our read step, which waits
    out a failed read itself) and stops the subscriber on NOGROUP (which our read step lets
    through), and a read hands a batch on through ``consume_one``."""
    cls = stream_subscriber.StreamBatchSubscriber
    consume = inspect.getsource(cls._consume)
    assert "self._get_msgs(" in consume, f"{UPGRADE}: _consume no longer calls _get_msgs"
    assert "NOGROUP" in consume, f"{UPGRADE}: _consume no longer handles a missing group"
    assert list(inspect.signature(cls._get_msgs).parameters) == ["self", "read"], (
        f"{UPGRADE}: _get_msgs takes other arguments"
    )
    assert "consume_one" in inspect.getsource(cls._get_msgs), (
        f"{UPGRADE}: a stream batch read no longer hands on through consume_one"
    )


def test_a_batch_message_has_the_keys_the_decoder_reads() -> None:
    """The raw message a batch subscriber's parser gets: the type parameter of FastStream's
    exported ``faststream.redis.RedisBatchStreamMessage`` (its ``raw_message``)."""
    [message_class, *_] = get_args(RedisBatchStreamMessage)  # Annotated[class, Context]
    [raw] = get_args(message_class.__orig_bases__[0])
    assert {"type", "channel", "data", "message_ids"} <= set(get_type_hints(raw)), (
        f"{UPGRADE}: the keys of RedisBatchStreamMessage's raw message"
    )


def test_a_stream_sub_is_copied_by_add_prefix_and_keeps_its_fields() -> None:
    sub = StreamSub("s", group="g", consumer="c", batch=True, max_records=5, polling_interval=9)
    assert "add_prefix" in vars(StreamSub), f"{UPGRADE}: StreamSub.add_prefix"
    assert (sub.name, sub.group, sub.consumer, sub.max_records, sub.polling_interval) == (
        "s",
        "g",
        "c",
        5,
        9,
    ), f"{UPGRADE}: StreamSub's fields"
    fixed = ext.FixedStreamSub("s", batch=True)
    assert fixed.add_prefix("") is fixed


def test_the_broker_makes_its_connection_state_in_one_method() -> None:
    assert "_make_connection_state" in vars(RedisBroker), (
        f"{UPGRADE}: RedisBroker._make_connection_state"
    )
    params = list(inspect.signature(RedisBroker._make_connection_state).parameters)
    assert params == ["self", "connection_options", "kwargs"], f"{UPGRADE}: its arguments"
    for name in ("connect", "disconnect", "client"):
        assert hasattr(RedisConnectionState, name), f"{UPGRADE}: RedisConnectionState.{name}"


async def test_a_message_is_published_as_its_body_alone_in_the_body_field(
    redis: Redis, keys: Keys
) -> None:
    """``PlainBody`` through FastStream's public ``message_format``: bytes, a string and a
    dict land in the field ``BODY`` (FastStream's wire format) as the body alone (the dict
    as its JSON), no FastStream headers in front."""
    stream = keys.events(0)
    broker = Broker(redis)
    for body in (b'{"a":1}', '{"a":1}', {"a": 1}):
        await broker.publish(body, stream=stream)
    entries = await redis.xrange(stream)
    assert [list(fields) for _, fields in entries] == [[ext.BODY]] * 3
    assert [json.loads(fields[ext.BODY]) for _, fields in entries] == [{"a": 1}] * 3


async def test_a_shared_follow_reads_several_streams_into_one_batch(
    redis: Redis, keys: Keys
) -> None:
    """The extension end to end: a subscriber made by ``broker.subscriber``, turned into a
    shared reader, started and stopped by FastStream, hands one batch of two streams."""
    streams = [keys.events(p) for p in (0, 1)]
    for stream in streams:
        await redis.xadd(stream, {"v": stream})
    batches: list[list[Delivery]] = []

    async def handle(deliveries: list[Delivery]) -> None:
        batches.append(deliveries)

    broker = Broker(redis)
    await broker.start()
    subscriber = ext.make_shared(
        follow(broker, streams[0], "0-0", 50, handle, SHARED_BLOCK_MS),
        ext.SharedFollow,
        broker.client,
    )
    subscriber.stream_sub.positions.update(dict.fromkeys(streams, "0-0"))
    await subscriber.start()
    try:

        async def got() -> bool:
            return bool(batches)

        await wait_for(got)
        await asyncio.sleep(0.2)
    finally:
        reader = subscriber.reader
        await ext.stop_subscriber(subscriber, 5.0)
        await broker.stop()
    assert [[d.stream for d in batch] for batch in batches] == [streams]
    assert reader.done(), "stop_subscriber returned before the read task ended"


async def test_a_read_the_server_refuses_is_retried_by_the_same_read_loop(
    redis: Redis, keys: Keys, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A read refused by the server (here WRONGTYPE; on a cluster NOREPLICAS, a master
    short of replicas refusing XREADGROUP, which writes) is a read failure, retried after
    ``READ_RETRY_S`` by the same read loop. FastStream re-raised it out of the loop, and its
    task supervisor started a new loop at once, again and again: a busy loop per stream
    for as long as the shard refused writes. The wait is the read step's own, not
    FastStream's back-off (a module constant, left alone): with that made an hour here, the
    stream is read again once it is a stream again."""
    monkeypatch.setattr(stream_subscriber, "CONSUME_ERROR_BACKOFF_SECONDS", 3600)
    stream = keys.decisions(0)
    handled: list[Delivery] = []
    async with _one_stream_consumer(redis, keys, stream, handled) as subscriber:
        first = subscriber.reader  # the task running its reads
        with caplog.at_level(logging.ERROR, logger="caravel.bus"):
            await redis.delete(stream)
            await redis.set(stream, "not a stream")

            async def refused() -> bool:
                return "Message fetch error" in caplog.text or subscriber.reader is not first

            await wait_for(refused)
            assert subscriber.reader is first
            await redis.delete(stream)
            await ensure_group(redis, stream, "g")
            await redis.xadd(stream, {"v": "after"})

            async def read_again() -> bool:
                return bool(handled)

            await wait_for(read_again)
            assert subscriber.reader is first


async def test_a_run_of_failed_reads_logs_one_traceback_and_starts_over_after_a_read(
    redis: Redis, keys: Keys, caplog: pytest.LogCaptureFixture
) -> None:
    """A stream whose reads keep failing (a shard failing over: NOREPLICAS, refused
    connections) is read again 0.1 s after the first failure, the wait doubling up to
    ``READ_RETRY_S``; its first failure is logged with the traceback, the 2nd, 4th, 8th...
    as one line, the others not. A read that succeeds starts the count over."""
    stream = keys.decisions(1)
    handled: list[Delivery] = []
    loops._tracebacks.clear()  # none of this kind of fault logged lately in this process
    async with _one_stream_consumer(redis, keys, stream, handled) as subscriber:
        with caplog.at_level(logging.ERROR, logger="caravel.bus"):
            await redis.delete(stream)
            await redis.set(stream, "not a stream")

            async def failed_often() -> bool:
                return subscriber.read_failures >= 5

            await wait_for(failed_often)
            lines = [r for r in caplog.records if r.getMessage() == "Message fetch error"]
            assert sum(r.exc_info is not None for r in lines) == 1
            assert len(lines) < subscriber.read_failures
            assert [ext.read_retry_s(n) for n in (1, 2, 3, 4, 5)] == [0.1, 0.2, 0.4, 0.5, 0.5]
            await redis.delete(stream)
            await ensure_group(redis, stream, "g")
            await redis.xadd(stream, {"v": "after"})

            async def read_again() -> bool:
                return bool(handled) and subscriber.read_failures == 0

            await wait_for(read_again)


async def test_reads_of_many_streams_failing_at_once_log_one_traceback(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A master's kill fails the reads of every subscriber of its shard at once (a lobby or
    a bot process follows a few dozen streams there): each run's first line is logged, but
    one traceback of that kind of fault in all, the others as their error alone; a
    different fault gets its own traceback. Formatting the same traceback for each was a
    tenth of a second of a loaded process's CPU, the healthy shards' requests waiting."""
    loops._tracebacks.clear()
    # a subscriber as the read step sees it: its count of failed reads and its stream
    failing = [SimpleNamespace(read_failures=0, stream_sub=StreamSub("s")) for _ in range(8)]
    other = SimpleNamespace(read_failures=0, stream_sub=StreamSub("t"))
    with caplog.at_level(logging.ERROR, logger="caravel.bus"):
        for subscriber in failing:
            await ext._wait_after(ConnectionError("refused"), subscriber)
        await ext._wait_after(ValueError("another fault"), failing[0])  # its 2nd: no traceback
        await ext._wait_after(ValueError("another fault"), other)
    lines = [r for r in caplog.records if r.getMessage() == "Message fetch error"]
    assert len(lines) == 10
    assert [type(r.exc_info[1]).__name__ for r in lines if r.exc_info] == [
        "ConnectionError",
        "ValueError",
    ]


@contextlib.asynccontextmanager
async def _one_stream_consumer(
    redis: Redis, keys: Keys, stream: str, handled: list[Delivery]
) -> AsyncIterator[Any]:
    """A group consumer ``g`` reading ``stream`` alone into ``handled``; yields its
    subscriber. Closed, with its broker, and the stream deleted at the end."""

    async def handle(deliveries: list[Delivery]) -> None:
        handled.extend(deliveries)

    broker = Broker(redis)
    consumer = GroupConsumer(broker, redis, "g", "c", keys, handle)
    await broker.start()
    await consumer.subscribe(stream)
    [subscriber] = {id(s): s for s in consumer._subscribers.values()}.values()
    try:
        yield subscriber
    finally:
        await consumer.close()
        await broker.stop()
        await redis.delete(stream)
