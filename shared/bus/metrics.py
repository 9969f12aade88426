"""FastStream's Prometheus series on every broker (kept by a middleware of ours,
:class:`BusMetrics`): the messages each service consumed, published and failed, and how long
it took, per channel, in the registry of the other metrics (``shared.observability.metrics``),
so one ``/metrics`` carries them all.

A channel is a stream kind with the partition as ``{p}`` (``cv:{p}:commands``), the address
of its channel in the AsyncAPI document: 64 partitions are not 64 series of each histogram.
The series are ``caravel_bus_*``, labelled by ``app_name`` (the service) and ``handler``
(consumed) or ``destination`` (published). A batch counts its entries, and its size is that
of their fields (the subscribers' parser leaves FastStream's body empty).

What :class:`~shared.bus.GroupConsumer` does outside FastStream's subscribers is counted
here too, by service, channel and group: the entries it reclaimed (``XAUTOCLAIM``) and handed
to its handler, ``caravel_bus_reclaimed_total``, and the ones it dead-lettered,
``caravel_bus_dead_lettered_total``.
"""

from __future__ import annotations

import re
import time
from collections.abc import Awaitable, Callable
from functools import lru_cache
from itertools import chain
from typing import Any, Self, TypeVar

from faststream import BaseMiddleware, PublishType, SourceType, StreamMessage
from faststream.exceptions import (
    AckMessage,
    IgnoredException,
    NackMessage,
    RejectMessage,
    SkipMessage,
)
from faststream.redis import RedisPublishCommand
from prometheus_client import REGISTRY, Counter, Gauge, Histogram

PREFIX = "caravel_bus"
_PARTITION = re.compile(r"\{\d+\}")


# FastStream's series (``faststream.prometheus``'s container: the same names, labels, help
# and buckets), made here once per process: its container and status tables are not part
# of its public API.
_RECEIVED = ["app_name", "broker", "handler"]
_PUBLISHED = ["app_name", "broker", "destination"]
SIZE_BUCKETS = (*(2.0**n for n in range(4, 25, 2)), float("inf"))
M = TypeVar("M", Counter, Gauge, Histogram)


def _series(kind: type[M], name: str, help: str, labels: list[str], **options: Any) -> M:
    """One ``caravel_bus_*`` series in the registry of the other metrics (one place for the
    prefix and the registry: every series of the bus is made so)."""
    return kind(f"{PREFIX}_{name}", help, labels, registry=REGISTRY, **options)


RECEIVED_TOTAL = _series(
    Counter,
    "received_messages",
    "Count of received messages by broker and handler",
    _RECEIVED,
)
RECEIVED_SIZE = _series(
    Histogram,
    "received_messages_size_bytes",
    "Histogram of received messages size in bytes by broker and handler",
    _RECEIVED,
    buckets=SIZE_BUCKETS,
)
IN_PROCESS = _series(
    Gauge,
    "received_messages_in_process",
    "Gauge of received messages in process by broker and handler",
    _RECEIVED,
)
PROCESSED = _series(
    Counter,
    "received_processed_messages",
    "Count of received processed messages by broker, handler and status",
    [*_RECEIVED, "status"],
)
PROCESSED_DURATION = _series(
    Histogram,
    "received_processed_messages_duration_seconds",
    "Histogram of received processed messages duration in seconds by broker and handler",
    _RECEIVED,
)
PROCESSED_EXCEPTIONS = _series(
    Counter,
    "received_processed_messages_exceptions",
    "Count of received processed messages exceptions by broker, handler and exception_type",
    [*_RECEIVED, "exception_type"],
)
PUBLISHED_TOTAL = _series(
    Counter,
    "published_messages",
    "Count of published messages by destination and status",
    [*_PUBLISHED, "status"],
)
PUBLISHED_DURATION = _series(
    Histogram,
    "published_messages_duration_seconds",
    "Histogram of published messages duration in seconds by broker and destination",
    _PUBLISHED,
)
PUBLISHED_EXCEPTIONS = _series(
    Counter,
    "published_messages_exceptions",
    "Count of published messages exceptions by broker, destination and exception_type",
    [*_PUBLISHED, "exception_type"],
)
# A processed message's status: by how its handler settled it (``msg.committed``, an
# ``AckStatus``, a ``str`` enum), else by the exception it raised, else ``error``.
_BY_ACK = {"ACKED": "acked", "NACKED": "nacked", "REJECTED": "rejected"}
_BY_EXCEPTION: dict[type[BaseException], str] = {
    AckMessage: "acked",
    NackMessage: "nacked",
    RejectMessage: "rejected",
    SkipMessage: "skipped",
}

_OUTSIDE = ["app_name", "channel", "group"]
RECLAIMED = _series(
    Counter,
    "reclaimed",
    "Entries a consumer group took over (XAUTOCLAIM) and handed to its handler again.",
    _OUTSIDE,
)
DEAD_LETTERED = _series(
    Counter, "dead_lettered", "Entries a consumer group moved to the dead letters.", _OUTSIDE
)


@lru_cache(maxsize=4096)
def channel(stream: str) -> str:
    """A partition stream's channel: its name with the partition as ``{p}`` (remembered:
    every batch a subscriber hands on is named so)."""
    return _PARTITION.sub("{p}", stream, count=1)


def _consumed(msg: StreamMessage[Any]) -> tuple[str, int, int]:
    """A consumed message's channel, size and count of entries (a batch: its entries'
    fields, the subscribers' parser leaving the body empty)."""
    raw = msg.raw_message
    stream = raw.get("channel") or raw.get("stream") or ""
    if str(raw.get("type", "")).startswith("b"):
        entries = raw["data"]
        # Summed in C: a generator's step per field of every entry, per batch.
        size = sum(map(len, chain.from_iterable(map(dict.values, entries))))
        return channel(stream), size, len(entries)
    return channel(stream), len(msg.body), 1


class _ByStatus(dict[str, Any]):
    """A counter's children by status, each made when first counted (as FastStream's
    middleware did: no series for a status never seen)."""

    def __init__(self, counter: Any, labels: dict[str, str]) -> None:
        super().__init__()
        self.counter, self.labels = counter, labels

    def __missing__(self, status: str) -> Any:
        child = self[status] = self.counter.labels(**self.labels, status=status)
        return child


class _Received:
    """One channel's consumer series (its labelled children, looked up once)."""

    __slots__ = ("duration", "exceptions", "in_process", "processed", "received", "size")

    def __init__(self, labels: dict[str, str]) -> None:
        self.received = RECEIVED_TOTAL.labels(**labels)
        self.size = RECEIVED_SIZE.labels(**labels)
        self.in_process = IN_PROCESS.labels(**labels)
        self.duration = PROCESSED_DURATION.labels(**labels)
        self.processed = _ByStatus(PROCESSED, labels)
        self.exceptions = PROCESSED_EXCEPTIONS


class _Published:
    """One channel's publisher series (its labelled children, looked up once)."""

    __slots__ = ("duration", "exceptions", "published")

    def __init__(self, labels: dict[str, str]) -> None:
        self.duration = PUBLISHED_DURATION.labels(**labels)
        self.published = _ByStatus(PUBLISHED_TOTAL, labels)
        self.exceptions = PUBLISHED_EXCEPTIONS


class BusMetrics:
    """FastStream's Prometheus series of one service's broker (``app_name``), kept by a
    middleware of ours: FastStream's (``PrometheusMiddleware``) builds a settings provider
    and a middleware of several layers per message and asks ``labels()`` six times per batch,
    each checking the labels under a lock: a quarter of the instructions of a batch's
    dispatch with one entry, which every consumer of a move pays. The series, their labels
    and what they count are the same (made once by this module, shared by the process'
    brokers); the children of each channel are found once."""

    def __init__(self, service: str) -> None:
        self.labels = {"app_name": service, "broker": "redis"}
        self._received: dict[str, _Received] = {}
        self._published: dict[str, _Published] = {}

    def __call__(self, msg: Any, /, *, context: Any) -> _Measured:
        """The middleware of one message or publication (FastStream makes one per each)."""
        return _Measured(self, msg, context=context)

    def received(self, handler: str) -> _Received:
        series = self._received.get(handler)
        if series is None:
            series = self._received[handler] = _Received({**self.labels, "handler": handler})
        return series

    def published(self, destination: str) -> _Published:
        series = self._published.get(destination)
        if series is None:
            series = self._published[destination] = _Published(
                {**self.labels, "destination": destination}
            )
        return series


class _Measured(BaseMiddleware[RedisPublishCommand, Any]):
    """Counts one consumed message or one publication in its service's series, as
    FastStream's ``BasePrometheusMiddleware`` does (its statuses, its exceptions)."""

    __slots__ = ("metrics",)

    def __init__(self, metrics: BusMetrics, msg: Any, /, *, context: Any) -> None:
        self.metrics, self.msg, self.context = metrics, msg, context

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> bool:
        return False

    async def consume_scope(
        self, call_next: Callable[[Any], Awaitable[Any]], msg: StreamMessage[Any]
    ) -> Any:
        if msg.source_type is SourceType.RESPONSE:
            return await call_next(msg)
        handler, size, count = _consumed(msg)
        series = self.metrics.received(handler)
        series.received.inc(count)
        series.size.observe(size)
        series.in_process.inc(count)
        error: Exception | None = None
        started = time.perf_counter()
        try:
            return await call_next(msg)
        except Exception as e:
            error = e
            if not isinstance(e, IgnoredException):
                labels = {**self.metrics.labels, "handler": handler}
                series.exceptions.labels(**labels, exception_type=type(e).__name__).inc()
            raise
        finally:
            series.duration.observe(time.perf_counter() - started)
            series.in_process.dec(count)
            status = "acked"
            if msg.committed or error:
                status = (
                    _BY_ACK.get(msg.committed or "")
                    or _BY_EXCEPTION.get(type(error))  # type: ignore[arg-type]
                    or "error"
                )
            series.processed[status].inc(count)

    async def publish_scope(
        self, call_next: Callable[[Any], Awaitable[Any]], cmd: RedisPublishCommand
    ) -> Any:
        if cmd.publish_type is PublishType.REPLY:
            return await call_next(cmd)
        destination = channel(cmd.destination)
        series = self.metrics.published(destination)
        status = "success"
        started = time.perf_counter()
        try:
            return await call_next(cmd)
        except Exception as e:
            status = "error"
            labels = {**self.metrics.labels, "destination": destination}
            series.exceptions.labels(**labels, exception_type=type(e).__name__).inc()
            raise
        finally:
            series.duration.observe(time.perf_counter() - started)
            series.published[status].inc(len(cmd.batch_bodies))


def bus_metrics(service: str) -> BusMetrics:
    """The metrics middleware of one service's broker (its ``app_name`` label)."""
    return BusMetrics(service)
