"""The hand-written JSON the engine sends reads back as its contracts: strings quoted without
the encoder only where that is the encoder's output, and decision requests, events and
accepted results equal to the models' own documents, whatever the ids hold."""

from __future__ import annotations

import dataclasses
import json
import random

import pytest
from pydantic import ValidationError

from services.engine import decision_requests
from services.engine.decision_requests import _decision_json, command_json
from shared.contracts import (
    SCHEMA_VERSION,
    CommandEnvelope,
    DecisionRequest,
    EventEnvelope,
    Made,
    dump_json,
    load_json,
    name_json,
    read_command,
    string_json,
)
from shared.contracts.envelopes import Kept, _optional_json
from shared.eventstore import Append
from shared.eventstore.store import EventStore
from shared.games import api

ODD = ["g-1", "abc123", "ABC", 'we"ird', "back\\slash", "ñandú", "tab\there", "", "x" * 64]
ODD += ["2026-11-27T19:00:00.123456+00:00", " a/b <c> & 'd' ", "del\x7f", "nl\n", "t-3f2a9c"]


def test_legal_commands_json_looked_up_by_identity_is_each_ones_json(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The engine looks its legal commands' JSON up by the commands' identity: the rules'
    own objects, commands made afresh (equal, or new) and the lookup after it dropped what it
    kept all give each command's own JSON, in order."""
    monkeypatch.setattr(decision_requests, "LISTED_KEPT", 50)
    lookup = decision_requests._ByIdentity()
    game, chooser = api.get(), random.Random(3)
    state, _ = game.new_game(game.rules(game.default_ruleset), 4, 11)
    longest = 0
    for _ in range(60):
        decisions = game.pending(state)
        for d in decisions:
            legal = game.legal_commands(state, d.seat)
            fresh = [dataclasses.replace(c) for c in legal]  # equal, not the same objects
            for commands in (legal, fresh, legal):
                assert lookup(commands) == [dump_json(c.to_dict()) for c in commands]
            longest = max(longest, len(legal))
        d = chooser.choice(decisions)
        game.decide_into(state, chooser.choice(game.legal_commands(state, d.seat)))
    assert len(lookup.kept) <= 50 + 2 * longest  # dropped past the bound, kept again since


def test_a_listing_found_by_its_commands_identities_is_their_json_and_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A seat's listing, found by its commands' identities, is their JSON joined and each
    command by its JSON, whether the commands are the rules' own objects, equal ones made
    afresh or the same ones again (then the very listing found before); it keeps its
    commands themselves (alive, so no other object takes their ids), and the listings kept
    are dropped past the bound."""
    monkeypatch.setattr(decision_requests, "LISTINGS_KEPT", 20)
    listings = decision_requests._Listings()
    game, chooser = api.get(), random.Random(5)
    state, _ = game.new_game(game.rules(game.default_ruleset), 4, 13)
    for _ in range(60):
        decisions = game.pending(state)
        for d in decisions:
            legal = game.legal_commands(state, d.seat)
            fresh = [dataclasses.replace(c) for c in legal]
            for commands in (legal, fresh):
                found = listings(commands)
                texts = [dump_json(c.to_dict()) for c in commands]
                assert found.json == ",".join(texts)
                assert found.by_json == dict(zip(texts, commands, strict=True))
                assert all(a is b for a, b in zip(found.commands, commands, strict=True))
            assert listings(list(legal)) is listings(legal)  # a repeat: the listing kept
        d = chooser.choice(decisions)
        game.decide_into(state, chooser.choice(game.legal_commands(state, d.seat)))
    assert len(listings.by_ids) <= 20


@pytest.mark.parametrize("text", ODD)
def test_strings_and_names_are_the_encoders_json(text: str) -> None:
    assert string_json(text) == dump_json(text)
    assert name_json(text) == dump_json(text)
    assert json.loads(string_json(text)) == text


def test_strings_json_kept_by_string_is_each_ones_and_dropped_past_its_bound() -> None:
    """The engine's caches of ids', names' and times' JSON (dictionaries, not ``lru_cache``)
    give each string's own JSON, a hit the very text kept, and hold at most their bound."""
    kept = Kept(string_json, 5)
    for _ in range(2):
        for text in ODD:
            assert kept[text] == dump_json(text)
            assert kept[text] is kept[text]
            assert len(kept) <= 5
    assert Kept(_optional_json, 3)[None] == "null"


def test_load_json_refuses_what_is_not_json() -> None:
    assert load_json(b'{"a":[1,null]}') == {"a": [1, None]}
    for bad in (b"", b"{", b"\xff", "nope"):
        with pytest.raises(ValueError):
            load_json(bad)


@pytest.mark.parametrize(
    "raw",
    [
        b'{"command_id":"c1","game_id":"g-1","seat":1,"type":"pass","payload":{},"actor":"bot",'
        b'"issued_at":"2026-11-28T09:47:43.894729Z"}',
        b'{"game_id":"g-1","type":"create_game","payload":{"players":4,"seed":1}}',
        b'{"game_id":"g 1","type":"pass"}',
        b'{"game_id":"g-1","type":"pass","seat":9,"extra":1}',
        b'{"game_id":"g-1"}',
        b"[1]",
        b"not json",
        b"",
    ],
)
def test_read_command_is_the_models_own_validation(raw: bytes) -> None:
    """The engine's :func:`read_command` accepts what the model accepts, as the same values,
    and refuses the rest with the same errors."""
    try:
        expected = CommandEnvelope.model_validate_json(raw)
    except ValidationError as e:
        with pytest.raises(ValidationError) as refused:
            read_command(raw)
        assert refused.value.errors() == e.errors()
        return
    read = read_command(raw)
    assert isinstance(read, CommandEnvelope)
    assert read.model_dump(exclude={"command_id", "issued_at"}) == expected.model_dump(
        exclude={"command_id", "issued_at"}
    )
    assert "command_id" not in raw.decode() or read == expected


@pytest.mark.parametrize("game_id", ["g-1", "abc123", 'we"ird', "ñ"])
def test_decision_requests_read_back_as_the_model(game_id: str) -> None:
    game = api.get()
    state, _ = game.new_game(game.rules(game.default_ruleset), 4, 7)
    chooser = random.Random(7)
    deadline = "2026-11-27T19:00:00.123456+00:00"
    for version in range(1, 40):
        decisions = game.pending(state)
        for d in decisions:
            legal = game.legal_commands(state, d.seat)
            listed = [command_json(c) for c in legal]
            joined = ",".join(listed)
            text = _decision_json(string_json(game_id), version, d, dump_json(deadline), joined)
            request = DecisionRequest.model_validate_json(text)
            assert json.loads(text) == {
                "request_id": f"{game_id}:{version}:{d.seat}",
                "game_id": game_id,
                "version": version,
                "seat": d.seat,
                "kind": d.kind,
                "deadline": deadline,
                "correlation_id": None,
                "legal_commands": [c.to_dict() for c in legal],
            }
            assert (request.game_id, request.version, request.seat) == (game_id, version, d.seat)
        d = chooser.choice(decisions)
        game.decide_into(state, chooser.choice(game.legal_commands(state, d.seat)))


@pytest.mark.parametrize("text", ODD)
def test_an_events_shared_fields_are_the_encoders_json(text: str) -> None:
    """What a command's events share, written by hand, is the encoder's JSON of those
    fields byte for byte, whatever the ids, the actor and the time hold."""
    for optional in (text, None):
        made = Made("g-1", optional, optional, optional, text)
        public = made.encode([api.Event("moved", {"n": 1})], 3, ["e1"])[0].public
        shared = {
            "causation_id": optional,
            "correlation_id": optional,
            "actor": optional,
            "recorded_at": text,
            "schema_version": SCHEMA_VERSION,
        }
        assert public.endswith("," + dump_json(shared)[1:])


@pytest.mark.parametrize("game_id", ["g-1", 'x"y'])
def test_events_and_results_read_back_as_the_models(game_id: str) -> None:
    game = api.get()
    _, events = game.new_game(game.rules(game.default_ruleset), 4, 3)
    ids = [f"{i:032x}" if i % 2 else f'id"{i}' for i in range(len(events))]
    made = Made(game_id, "c1", "c1", "bot", "2026-11-27T19:00:00+00:00")
    for encoded, event, event_id in zip(made.encode(events, 1, ids), events, ids, strict=True):
        envelope = EventEnvelope.model_validate_json(encoded.public)
        assert (envelope.event_id, envelope.game_id) == (event_id, game_id)
        assert (envelope.type, envelope.data) == (event.type, event.data)
    for seat in (None, 2):
        result = EventStore._result_json(Append(game_id, 4, [("{}", "")], 'c"1', seat=seat))
        assert json.loads(result) == {
            "command_id": 'c"1',
            "game_id": game_id,
            "status": "accepted",
            "seat": seat,
            "version": 5,
            "code": None,
            "reason": None,
        }
