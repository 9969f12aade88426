"""Per-game event versions: a game bumps an event type's ``version`` and declares the step
``upcast_v1_v2`` on its class; every log written before reads in the new shape (through the
codec, as the engine, the views, scoring and the archive read logs), a new log records the
versions in its ``game_created``, and a game missing a step is refused when it registers.

The Age of Discovery's ``money`` event stands in for a real change: the test renames its
``amount`` to ``coins`` (version 2) and applies it with a handler of the new shape."""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

import pytest
from redis.asyncio import Redis

from shared.bus import Keys
from shared.eventstore import EventStore, GameCodec, logfile, to_event
from shared.eventstore.transfer import import_log
from shared.games import api, registry
from shared.games.age_of_discovery.events import Money
from shared.games.events import EventData, upcasters

from .playthroughs import HERE, read_index, read_log

OLD_LOG = Path(__file__).parent / "logs" / "age_of_discovery-schema1.jsonl.gz"
"""A log stored in the oldest shape (envelope schema 1, ``game_created`` without ``game``,
every event type at version 1): the 2-player playthrough at seed 1, kept as written then."""


class MoneyV2(EventData):
    type: ClassVar[str] = "money"
    version: ClassVar[int] = 2
    seat: int
    coins: int
    reason: str

    @staticmethod
    def upcast_v1_v2(data: dict[str, Any]) -> dict[str, Any]:
        if "coins" in data:  # written at version 2 already (a game that spans the change)
            return data
        new = dict(data)
        new["coins"] = new.pop("amount")
        return new


@pytest.fixture
def bumped(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """``money`` at version 2 in The Age of Discovery, applied by a handler of the new shape
    that fails on the old one; returns the data each application saw."""
    game = api.get("age_of_discovery")
    old_handler = game.handlers.table["money"]
    seen: list[dict[str, Any]] = []

    def apply_v2(s: Any, d: dict[str, Any], secret: Any) -> None:
        seen.append(d)
        if "coins" not in d:  # made just now by the rules, whose decide this test leaves as is
            old_handler(s, d, secret)  # (import decides every move again); tests check ``seen``
            return
        v1 = {key: value for key, value in d.items() if key != "coins"}
        old_handler(s, {**v1, "amount": d["coins"]}, secret)

    monkeypatch.setitem(game.events, "money", MoneyV2)  # type: ignore[index]
    monkeypatch.setitem(game.handlers.table, "money", apply_v2)
    return seen


def _hash_2p() -> str:
    (kept,) = [p for p in read_index() if (p.game, p.players, p.seed) == ("age_of_discovery", 2, 1)]
    return kept.final_hash


def test_a_stored_old_log_reads(bumped: list[dict[str, Any]]) -> None:
    """The log stored in the oldest shape reads upcast: through the codec from its file (as
    the archive and ``caravel games import`` read it) and event by event through
    ``to_event`` (as scoring reads the bus), to the hash it was recorded with."""
    codec, game = GameCodec(), api.get("age_of_discovery")
    envelopes = logfile.read_file(OLD_LOG)
    assert codec.state_hash(codec.replay(envelopes)) == _hash_2p()
    moneys = sum(1 for e in envelopes if e.type == "money")
    assert moneys > 10 and len(bumped) == moneys
    assert all("coins" in d and "amount" not in d for d in bumped)
    events = [to_event(e, game) for e in envelopes]
    assert [api.check_event(e, game.event_types()) for e in events] == [None] * len(events)


def test_a_playthrough_replays_upcast(bumped: list[dict[str, Any]]) -> None:
    """The game's own replay upcasts too (tests and tools replay rules-level logs)."""
    game = api.get("age_of_discovery")
    state = game.replay(read_log(HERE / "age_of_discovery-2p-1.jsonl.gz"))
    assert game.state_hash(state) == _hash_2p() and bumped


def test_without_a_bump_nothing_is_recorded_or_changed() -> None:
    """Every type at version 1: ``game_created`` records no versions (logs as before)."""
    for name in api.names():
        game = api.get(name)
        _, events = game.new_game(game.rules(game.default_ruleset), 2, 1)
        assert "event_versions" not in events[0].data
        money = api.Event("money", {"seat": 0, "amount": 3, "reason": "x"})
        assert game.upcast(money) is money


def test_a_new_log_records_the_versions(monkeypatch: pytest.MonkeyPatch) -> None:
    """A log created after the bump names it in ``game_created``, whose class declares it;
    an event recorded at version 2 is not stepped again, nor is one already in its shape.
    (The rules here still emit the old shape: only the class is bumped.)"""
    game = api.get("age_of_discovery")
    monkeypatch.setitem(game.events, "money", MoneyV2)  # type: ignore[index]
    _, events = game.new_game(game.rules("standard"), 2, 1)
    assert events[0].data["event_versions"] == {"money": 2}
    assert api.check_event(events[0], game.event_types()) is None
    v2 = api.Event("money", {"seat": 0, "coins": 3, "reason": "x"})
    assert game.upcast(v2, {"money": 2}) is v2
    assert game.upcast(v2).data == v2.data
    v1 = api.Event("money", {"seat": 0, "amount": 3, "reason": "x"})
    assert game.upcast(v1).data == v2.data


def test_a_version_without_its_step_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    class MoneyV3(MoneyV2):
        version: ClassVar[int] = 3

    with pytest.raises(TypeError, match="upcast_v2_v3"):
        upcasters(MoneyV3)
    game = api.get("age_of_discovery")
    monkeypatch.setitem(game.events, "money", MoneyV3)  # type: ignore[index]
    state, _ = game.new_game(game.rules("standard"), 2, 1)
    with pytest.raises(TypeError, match="money is at version 3"):
        registry.register(game, type(state))
    assert upcasters(Money) == []


async def test_a_log_in_redis_loads_upcast(
    redis: Redis, keys: Keys, bumped: list[dict[str, Any]]
) -> None:
    """The old log imported into the event store (as ``caravel games import`` does) and
    loaded as the engine loads a game: its events are read upcast."""
    store = EventStore(redis, keys)
    envelopes = logfile.read_file(OLD_LOG)
    assert await import_log(store, envelopes) == len(envelopes)
    bumped.clear()
    loaded = await store.load(envelopes[0].game_id, GameCodec())
    assert loaded.version == len(envelopes)
    assert GameCodec().state_hash(loaded.state) == _hash_2p()
    assert bumped and all("coins" in d for d in bumped)
