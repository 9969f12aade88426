"""FastStream's Prometheus middleware on every broker: the messages each service consumed,
published and failed, and how long it took, per channel, in the registry of the other
metrics (``shared.observability.metrics``), so one ``/metrics`` carries them all.

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
from functools import lru_cache
from typing import Any

from faststream.message import StreamMessage
from faststream.prometheus import ConsumeAttrs
from faststream.prometheus.middleware import PrometheusMiddleware
from faststream.redis.prometheus.provider import BaseRedisMetricsSettingsProvider
from faststream.redis.response import RedisPublishCommand
from prometheus_client import REGISTRY, Counter
from prometheus_client.metrics import MetricWrapperBase

PREFIX = "caravel_bus"
_PARTITION = re.compile(r"\{\d+\}")


_OUTSIDE = ["app_name", "channel", "group"]
RECLAIMED = Counter(
    f"{PREFIX}_reclaimed",
    "Entries a consumer group took over (XAUTOCLAIM) and handed to its handler again.",
    _OUTSIDE,
    registry=REGISTRY,
)
DEAD_LETTERED = Counter(
    f"{PREFIX}_dead_lettered",
    "Entries a consumer group moved to the dead letters.",
    _OUTSIDE,
    registry=REGISTRY,
)


@lru_cache(maxsize=4096)
def channel(stream: str) -> str:
    """A partition stream's channel: its name with the partition as ``{p}`` (remembered:
    every batch a subscriber hands on is named so)."""
    return _PARTITION.sub("{p}", stream, count=1)


class _Channels(BaseRedisMetricsSettingsProvider):
    """FastStream's Redis labels, by channel rather than by stream."""

    __slots__ = ()

    def get_consume_attrs_from_message(self, msg: StreamMessage[dict[str, Any]]) -> ConsumeAttrs:
        raw = msg.raw_message
        stream = raw.get("channel") or raw.get("stream") or ""
        if str(raw.get("type", "")).startswith("b"):  # a batch: its entries' fields
            entries = raw["data"]
            size = sum(len(value) for fields in entries for value in fields.values())
            return {
                "destination_name": channel(stream),
                "message_size": size,
                "messages_count": len(entries),
            }
        return {
            "destination_name": channel(stream),
            "message_size": len(msg.body),
            "messages_count": 1,
        }

    def get_publish_destination_name_from_cmd(self, cmd: RedisPublishCommand) -> str:
        return channel(cmd.destination)


def _channels(msg: dict[str, Any] | None) -> _Channels:
    return _Channels()


def bus_metrics(service: str) -> PrometheusMiddleware[Any, Any]:
    """The middleware of one service's broker (its ``app_name`` label), its series' children
    kept (:class:`_Children`)."""
    middleware: PrometheusMiddleware[Any, Any] = PrometheusMiddleware(
        settings_provider_factory=_channels,
        registry=REGISTRY,
        app_name=service,
        metrics_prefix=PREFIX,
    )
    container = middleware._metrics_container
    for name in container.__slots__:
        metric = getattr(container, name, None)
        if isinstance(metric, MetricWrapperBase):
            setattr(container, name, _Children(metric))
    return middleware


class _Children:
    """A metric that keeps its labelled children: FastStream's middleware asks ``labels()``
    six times per batch, and prometheus-client checks the labels and takes a lock each time
    (4% of the engine's CPU in a py-spy profile, with a batch of one or two commands per
    partition subscriber). Only ``labels`` is what FastStream's metrics manager calls."""

    def __init__(self, metric: MetricWrapperBase) -> None:
        self._metric = metric
        self._children: dict[tuple[tuple[str, str], ...], Any] = {}

    def labels(self, **labels: str) -> Any:
        key = tuple(labels.items())
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = self._metric.labels(**labels)
        return child
