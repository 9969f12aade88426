"""OpenTelemetry spans of the bus: FastStream's telemetry middleware on every broker when an
exporter is configured, and a span per command the engine decides, carrying game and command."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import nullcontext
from typing import Any

import pytest
from faststream.redis.opentelemetry import RedisTelemetryMiddleware
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from redis.asyncio import Redis

from shared.bus import Broker, CommandSender, Keys, tracing
from shared.bus.metrics import channel

from ..backbone.helpers import play_locally, running_engine


@pytest.fixture(autouse=True)
def no_endpoint(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """No OTLP endpoint from the environment; whatever a test installs is removed after."""
    for name in tracing.ENDPOINT_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    yield
    tracing.use(None)


def _telemetry(broker: Broker) -> list[Any]:
    return [m for m in broker.middlewares if isinstance(m, RedisTelemetryMiddleware)]


async def test_a_command_through_the_engine_is_traced_with_its_game_and_command(
    redis: Redis, keys: Keys
) -> None:
    exporter = InMemorySpanExporter()
    tracing.use(exporter)
    commands, _ = play_locally("g-traced", 3, seed=2, limit=1)
    create, move = commands
    sender = CommandSender(redis, keys)  # made once tracing is on: its publishes are traced
    async with running_engine(redis, keys) as engine:
        assert _telemetry(engine.broker)
        for command in (create, move):
            assert (await sender.execute(command)).status == "accepted"

    spans = exporter.get_finished_spans()
    decided = {s.attributes[tracing.COMMAND]: s for s in spans if s.name.startswith("command ")}
    assert set(decided) == {create.command_id, move.command_id}
    for command in (create, move):
        span = decided[command.command_id]
        assert span.name == f"command {command.type}"
        assert span.attributes[tracing.GAME] == "g-traced"
        assert span.attributes[tracing.COMMAND_TYPE] == command.type
    assert decided[move.command_id].attributes[tracing.SEAT] == move.seat
    # Each command span is a child of the span of the batch FastStream handed the engine:
    # on one Redis the batch of all its partitions' streams, named for their channel.
    stream = keys.commands(keys.partition("g-traced"))
    read = {f"{stream} process", f"{channel(stream)} process"}
    batches = {s.context.span_id: s for s in spans if s.name in read}
    for span in decided.values():
        assert span.parent is not None and span.parent.span_id in batches
    published = [s for s in spans if s.name == f"{stream} publish"]  # the sender's, traced too
    # ... each under its command's id, the correlation id it was published with.
    conversations = {s.attributes["messaging.message.conversation_id"] for s in published}
    assert conversations == {create.command_id, move.command_id}


def test_without_an_exporter_there_is_no_tracing() -> None:
    assert not tracing.configured()
    assert tracing.provider() is None
    assert _telemetry(Broker(Redis())) == []
    assert not tracing.on()
    assert isinstance(tracing.command_span("g", "c", "t", None), nullcontext)


def test_an_otlp_endpoint_turns_tracing_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:9")  # never reached
    try:
        assert tracing.configured()
        assert len(_telemetry(Broker(Redis()))) == 1
    finally:
        tracing.provider().shutdown()
