"""The bus's AsyncAPI document: generated from the services' own names and contracts, and the
copy in the repository is the one the code generates."""

from __future__ import annotations

from pathlib import Path

from services.ai.service import GROUP as AI_GROUP
from services.asyncapi import DOCUMENT, REGENERATE, document, to_yaml
from services.engine.worker import GROUP as ENGINE_GROUP
from shared.bus import Keys
from shared.games import api

from . import asyncapi_parser


def test_the_document_in_the_repository_is_the_generated_one() -> None:
    generated = to_yaml(document())
    assert DOCUMENT.read_text() == generated, f"docs/asyncapi.yaml is stale: run `{REGENERATE}`"


def test_each_stream_kind_is_one_channel_template_with_its_writers_and_readers() -> None:
    doc = document()
    keys = Keys()
    channels = doc["channels"]
    by_address: dict[str, dict[str, str]] = {}
    for name, channel in channels.items():
        redis = channel["bindings"]["redis"]
        by_address.setdefault(channel["address"], {})[name] = redis.get(
            "groupName", redis["method"]
        )
        if "{p}" in channel["address"]:
            partition = {"p": {"description": "The partition: 0 to 63 by default."}}
            assert channel["parameters"] == partition
        else:
            assert "parameters" not in channel
        assert doc["operations"][name]["action"] == (
            "send" if redis["method"] == "xadd" else "receive"
        )
    commands = keys.commands(0).replace("{0}", "{p}")
    assert by_address[commands] == {
        "lobby:commands": "xadd",
        "ai:commands": "xadd",
        "engine:commands": ENGINE_GROUP,
    }
    decisions = by_address[keys.decisions(0).replace("{0}", "{p}")]
    assert decisions == {"engine:decisions": "xadd", "lobby:decisions": "xread"}
    bots = by_address[keys.bot_decisions(0).replace("{0}", "{p}")]
    assert bots == {"engine:botdecisions": "xadd", "ai:botdecisions": AI_GROUP}
    assert {a.split(":")[-1] for a in by_address} == {
        "commands",
        "events",
        "decisions",
        "botdecisions",
        "rejections",
        "deadletters",
        "viewwants",
        "seatchanges",
    }
    assert by_address[keys.view_wants(0).replace("{0}", "{p}")] == {
        "lobby:viewwants": "xadd",
        "ai:viewwants": "xadd",
        "views:viewwants": "xread",
    }
    assert by_address[keys.seat_changes(0).replace("{0}", "{p}")] == {
        "lobby:seatchanges": "xadd",
        "ai:seatchanges": "xread",
    }
    messages = doc["components"]["messages"]
    engine_reads = messages["engine:commands:SubscribeMessage"]["payload"]["$ref"]
    assert engine_reads == "#/components/schemas/CommandEnvelope"
    envelope = doc["components"]["schemas"]["CommandEnvelope"]
    assert {"game_id", "type"} <= set(envelope["required"])
    for name, model in {"ai:seatchanges": "SeatChange", "views:viewwants": "ViewWant"}.items():
        read = messages[f"{name}:SubscribeMessage"]["payload"]["$ref"]
        assert read == f"#/components/schemas/{model}"


def test_the_document_carries_each_games_event_payloads() -> None:
    """Every registered game's events, by type, with the schema of their ``data``."""
    schemas = document()["components"]["schemas"]
    for name in api.names():
        types = api.get(name).event_types()
        refs = {ref["$ref"].rsplit("/", 1)[1] for ref in schemas[f"{name}.events"]["oneOf"]}
        assert refs == {f"{name}.{kind}" for kind in types}
        for kind, cls in types.items():
            assert schemas[f"{name}.{kind}"] == api.event_schema(cls)
    assert "seat" in schemas["navegador.colony_founded"]["required"]


def test_the_asyncapi_parser_accepts_the_document_with_every_games_events() -> None:
    """``@asyncapi/parser`` finds no error in docs/asyncapi.yaml, and what it parsed holds
    every channel and every registered game's event payloads."""
    report = asyncapi_parser.parse(DOCUMENT)
    errors = [d for d in report["diagnostics"] if d["severity"] == 0]
    assert report["valid"] and not errors, errors
    parsed = report["document"]
    doc = document()
    assert parsed["version"] == doc["asyncapi"]
    assert set(parsed["channels"]) == set(doc["channels"])
    assert set(parsed["operations"]) == set(doc["operations"])
    for name in api.names():
        for kind in api.get(name).event_types():
            assert f"{name}.{kind}" in parsed["schemas"]


def test_the_asyncapi_parser_refuses_a_broken_document(tmp_path: Path) -> None:
    """The check can fail: an operation sent on a channel the document does not have, and
    a payload that is no schema, are errors."""
    doc = document()
    operation = next(iter(doc["operations"].values()))
    operation["channel"] = {"$ref": "#/channels/nowhere"}
    message = next(iter(doc["components"]["messages"].values()))
    message["payload"] = {"type": "no-such-type"}
    broken = tmp_path / "asyncapi.yaml"
    broken.write_text(to_yaml(doc))
    report = asyncapi_parser.parse(broken)
    assert not report["valid"]
    assert any(d["severity"] == 0 for d in report["diagnostics"])
