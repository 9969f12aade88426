"""The lobby's one reader of the partition event streams, on a real Redis."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime
from typing import Any

import pytest
from redis.asyncio import Redis

from services.lobby.fanout import Decision, EventFanout, Published
from shared.bus import Keys, connect
from shared.contracts import DecisionHead, DecisionRequest, decision_head

from ..cluster import OwnRedis


@pytest.fixture
def redis(any_redis: Redis) -> Redis:
    """Every test here runs on one Redis and again on the session's Redis Cluster."""
    return any_redis


async def _append(redis: Redis, keys: Keys, game_id: str, version: int) -> None:
    """An entry as the engine's append script writes it: game, version, count, events."""
    events = json.dumps([{"version": version, "type": "x"}])
    await redis.xadd(
        keys.events(keys.partition(game_id)), {"g": game_id, "v": version, "n": 1, "e": events}
    )


async def test_listeners_get_their_games_entries_from_listening_on_once_each(
    redis: Redis, keys: Keys
) -> None:
    fanout = EventFanout(redis, keys, block_ms=50)
    await _append(redis, keys, "g-a", 1)  # before anyone listens: the log's business
    async with fanout.listen("g-a") as a1, fanout.listen("g-a") as a2, fanout.listen("g-b") as b:
        for version in (2, 3):
            await _append(redis, keys, "g-a", version)
            await _append(redis, keys, "g-b", version)
        got_a1 = [await asyncio.wait_for(a1.get(), 10) for _ in range(2)]
        got_a2 = [await asyncio.wait_for(a2.get(), 10) for _ in range(2)]
        got_b = [await asyncio.wait_for(b.get(), 10) for _ in range(2)]
        assert [n.version for n in got_a1] == [n.version for n in got_b] == [2, 3]
        assert got_a1 == got_a2
        assert {n.game_id for n in got_a1} == {"g-a"} and {n.game_id for n in got_b} == {"g-b"}
        assert a1.empty() and a2.empty() and b.empty()
        # The event and decision streams of the listened games' partitions, no other.
        listened = {keys.partition("g-a"), keys.partition("g-b")}
        assert sorted(fanout.streams) == sorted(
            s for p in listened for s in (keys.events(p), keys.decisions(p))
        )
    assert not fanout.streams  # nobody listens: stopped

    await _append(redis, keys, "g-a", 4)
    async with fanout.listen("g-a") as again:
        await _append(redis, keys, "g-a", 5)
        published = await asyncio.wait_for(again.get(), 10)
        assert isinstance(published, Published)
        assert (published.version, published.events[0].version) == (5, 5)
        assert json.loads(published.events[0].frame) == {"version": 5, "type": "x"}
        assert again.empty()


async def test_listeners_get_their_games_decision_requests_after_their_events(
    redis: Redis, keys: Keys
) -> None:
    """The engine adds a game's decision requests to the partition's decision stream with
    its events: a listener of the game gets both, the events' notification first."""
    fanout = EventFanout(redis, keys, block_ms=50)
    async with fanout.listen("g-a") as a:
        for game_id in ("g-b", "g-a"):
            request = DecisionRequest(
                game_id=game_id, version=3, seat=1, kind="place",
                deadline=datetime.now(UTC), legal_commands=[{"type": "pass"}],
            )  # fmt: skip
            await _append(redis, keys, game_id, 3)
            stream = keys.decisions(keys.partition(game_id))
            await redis.xadd(stream, {"r": request.model_dump_json()})
        first = await asyncio.wait_for(a.get(), 10)
        second = await asyncio.wait_for(a.get(), 10)
        assert isinstance(first, Published) and first.version == 3
        assert isinstance(second, Decision)
        assert second.raw == request.model_dump_json().encode()  # g-a's (g-b's: to nobody)
        assert second.head == (game_id, 3, 1)
        seat_frame = json.loads(second.frame(spectator=False))
        assert seat_frame == {"type": "decision", **request.model_dump(mode="json")}
        assert json.loads(second.frame(spectator=True))["legal_commands"] == []
        assert a.empty()


async def test_a_partition_is_read_only_while_one_of_its_games_is_listened_to(
    redis: Redis, keys: Keys
) -> None:
    """Lobby processes beside each other read only their own sockets' partitions: a
    partition nobody here listens to is not read, and one listened to again is read from
    then on (nothing written before that is delivered, nothing after it is missed)."""
    fanout = EventFanout(redis, keys, block_ms=50)
    a = "g-a"
    b = next(f"g-{i}" for i in range(1000) if keys.partition(f"g-{i}") != keys.partition(a))
    async with fanout.listen(a) as queue_a:
        assert sorted(fanout.streams) == sorted(
            [keys.events(keys.partition(a)), keys.decisions(keys.partition(a))]
        )
        await _append(redis, keys, b, 1)  # nobody listens to b's partition: not read
        async with fanout.listen(b) as queue_b:
            assert len(fanout.streams) == 4
            await _append(redis, keys, b, 2)
            await _append(redis, keys, a, 1)
            got_b = await asyncio.wait_for(queue_b.get(), 10)
            got_a = await asyncio.wait_for(queue_a.get(), 10)
            assert isinstance(got_b, Published) and got_b.version == 2
            assert isinstance(got_a, Published) and got_a.version == 1
        assert len(fanout.streams) == 2  # b's partition: dropped with its last listener
        await _append(redis, keys, a, 2)
        got = await asyncio.wait_for(queue_a.get(), 10)
        assert isinstance(got, Published) and (got.game_id, got.version) == (a, 2)
        assert queue_a.empty() and queue_b.empty()
    assert not fanout.streams
    await fanout.close()


async def test_a_linger_reads_the_entries_written_meanwhile_at_once_all_in_order(
    keys: Keys,
) -> None:
    """After a read that brought entries the fan-out waits (``linger_ms``) before reading
    again: what was written meanwhile, to several partitions' event and decision streams,
    comes in one XREAD, every entry, each game's in order, a partition listened to during
    the wait included from its listening on. Without the linger, each entry written while
    the reader blocks wakes it: one XREAD per entry. Counted on a Redis of the test's own
    (its ``commandstats``: no other test's reads in them)."""
    async with OwnRedis() as server:
        await server.start()
        redis = connect(server.url)
        fanout = EventFanout(redis, keys, block_ms=50, linger_ms=500)
        a = "g-a"
        b = next(f"g-{i}" for i in range(1000) if keys.partition(f"g-{i}") != keys.partition(a))
        try:
            async with fanout.listen(a) as queue_a:
                await _append(redis, keys, a, 1)
                first = await asyncio.wait_for(queue_a.get(), 10)
                assert isinstance(first, Published) and first.version == 1
                await redis.config_resetstat()  # the reader lingers now
                await _append(redis, keys, b, 1)  # before b is listened to: not delivered
                async with fanout.listen(b) as queue_b:
                    request = DecisionRequest(
                        game_id=a, version=3, seat=1, kind="place",
                        deadline=datetime.now(UTC), legal_commands=[],
                    )  # fmt: skip
                    decisions = keys.decisions(keys.partition(a))
                    for game_id, version in ((a, 2), (b, 2), (a, 3), (b, 3)):
                        await _append(redis, keys, game_id, version)
                        if (game_id, version) == (a, 3):  # its request, as the engine adds it
                            await redis.xadd(decisions, {"r": request.model_dump_json()})
                        await asyncio.sleep(0.02)  # a reader that does not linger reads each
                    got_a = [await asyncio.wait_for(queue_a.get(), 10) for _ in range(3)]
                    got_b = [await asyncio.wait_for(queue_b.get(), 10) for _ in range(2)]
                    stats: Any = await redis.info("commandstats")
                    assert [x.version for x in got_a[:2] if isinstance(x, Published)] == [2, 3]
                    assert isinstance(got_a[2], Decision) and got_a[2].head == (a, 3, 1)
                    assert [x.version for x in got_b if isinstance(x, Published)] == [2, 3]
                    assert stats["cmdstat_xread"]["calls"] <= 2  # 4 or more without the linger
                    await asyncio.sleep(0.1)
                    assert queue_a.empty() and queue_b.empty()
        finally:
            await fanout.close()
            await redis.aclose()


def test_a_decision_requests_head_is_read_without_parsing_it() -> None:
    """A lobby routes a request by its head (game, version, seat), whether the model or the
    engine wrote it, and not by a field of the same name in its legal commands; a head in
    another form is read by parsing the document."""
    request = DecisionRequest(
        game_id="g-a", version=3, seat=1, kind="place",
        deadline=datetime.now(UTC), legal_commands=[{"type": "x", "seat": 0, "version": 9}],
    )  # fmt: skip
    assert decision_head(request.model_dump_json().encode()) == ("g-a", 3, 1)
    engine_written = (
        b'{"request_id":"g-a:3:1","game_id":"g-a","version":3,"seat":1,"kind":"turn",'
        b'"legal_commands":[{"seat":0}]}'
    )
    assert decision_head(engine_written) == DecisionHead("g-a", 3, 1)
    reordered = b'{"seat":1,"legal_commands":[],"version":4,"game_id":"g-\\"a"}'
    assert decision_head(reordered) == ('g-"a', 4, 1)
    escaped = b'{"request_id":"g-\\"a:4:1","game_id":"g-\\"a","version":4,"seat":1,"kind":"turn"}'
    assert decision_head(escaped) == ('g-"a', 4, 1)
