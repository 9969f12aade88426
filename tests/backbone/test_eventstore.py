"""The event store on a real Redis (and on a Redis Cluster): atomic appends, conflicts,
idempotency, snapshots."""

from __future__ import annotations

import asyncio
import json
import time
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
from redis.asyncio import Redis

from shared.bus import (
    Broker,
    CommandSender,
    Delivery,
    GroupConsumer,
    Keys,
    connect,
    delete_namespace,
    ensure_group,
)
from shared.contracts import (
    SCHEMA_VERSION,
    CommandResult,
    EncodedEvent,
    EventEnvelope,
    command_key,
    load_event,
    read_event,
    stored_event_id,
)
from shared.eventstore import Append, EventStore, GameCodec, Pending, pending_of
from shared.games import age_of_discovery as aod

from ..cluster import OwnRedis
from .helpers import RULES, stored, wait_for


def game_events(game_id: str, seed: int = 3) -> tuple[list[EventEnvelope], aod.GameState]:
    state, events = aod.new_game(RULES, None, 3, seed)
    envelopes = [stored(game_id, e, i) for i, e in enumerate(events, 1)]
    return envelopes, state


def encoded(events: list[EventEnvelope]) -> list[EncodedEvent]:
    return [e.encode() for e in events]


async def test_append_then_read_back_in_order(any_redis: Redis, keys: Keys) -> None:
    store = EventStore(any_redis, keys)
    events, _ = game_events("g-read")
    result = await store.append(Append("g-read", 0, encoded(events), "c1"))
    assert (result.status, result.version) == ("ok", len(events))
    back = await store.read("g-read")
    assert [e.version for e in back] == list(range(1, len(events) + 1))
    assert back[1].secret is not None  # the engine's own log keeps server-only values
    assert await store.version("g-read") == len(events)
    assert await store.game_ids(keys.partition("g-read")) == ["g-read"]


async def test_read_many_reads_each_games_range_in_one_call(any_redis: Redis, keys: Keys) -> None:
    """Each game's events with versions in (after, upto]; an unknown game reads as empty."""
    store = EventStore(any_redis, keys)
    a, _ = game_events("g-many-a", seed=3)
    b, _ = game_events("g-many-b", seed=4)
    await store.append(Append("g-many-a", 0, encoded(a), "c1"))
    await store.append(Append("g-many-b", 0, encoded(b), "c1"))
    got = await store.read_many(
        {"g-many-a": (2, 5), "g-many-b": (len(b) - 1, None), "g-many-none": (0, None)}
    )
    assert [e.version for e in got["g-many-a"]] == [3, 4, 5]
    assert got["g-many-a"] == a[2:5]
    assert [e.version for e in got["g-many-b"]] == [len(b)]
    assert got["g-many-b"][0].secret == b[-1].secret
    assert got["g-many-none"] == []


async def test_read_past_gives_the_events_after_and_the_id_of_the_event_at_after(
    any_redis: Redis, keys: Keys
) -> None:
    """``read_past`` reads (after, upto] as ``read_many`` does, and the id of the event at
    ``after`` (what a consumer holds), None where the log has none there; an id that is not
    plain ASCII (escaped in the stored JSON) is read back as written."""
    store = EventStore(any_redis, keys)
    a, _ = game_events("g-past-a", seed=3)
    a[3] = a[3].model_copy(update={"event_id": 'odd "id" \\ é'})
    await store.append(Append("g-past-a", 0, encoded(a), "c1"))
    got, ids = await store.read_past({"g-past-a": (4, 6), "g-past-none": (2, 5)})
    assert got["g-past-a"] == a[4:6] and ids["g-past-a"] == 'odd "id" \\ é'
    assert got["g-past-none"] == [] and ids["g-past-none"] is None
    tail, tail_ids = await store.read_past({"g-past-a": (len(a), None)})
    assert tail["g-past-a"] == [] and tail_ids["g-past-a"] == a[-1].event_id
    head, head_ids = await store.read_past({"g-past-a": (0, 2)})
    assert head["g-past-a"] == a[:2] and head_ids["g-past-a"] is None
    beyond, beyond_ids = await store.read_past({"g-past-a": (len(a) + 1, None)})
    assert beyond["g-past-a"] == [] and beyond_ids["g-past-a"] is None
    assert all(stored_event_id(e.encode().public.encode()) == e.event_id for e in a)


async def test_stale_version_is_a_conflict_and_writes_nothing(any_redis: Redis, keys: Keys) -> None:
    store = EventStore(any_redis, keys)
    events, _ = game_events("g-stale")
    await store.append(Append("g-stale", 0, encoded(events[:3]), "c1"))
    p = keys.partition("g-stale")
    public_before = await any_redis.xlen(keys.events(p))
    stale = await store.append(Append("g-stale", 1, encoded(events[1:4]), "c2"))
    assert (stale.status, stale.version) == ("conflict", 3)
    assert await any_redis.xlen(keys.log("g-stale")) == 3
    assert await any_redis.xlen(keys.events(p)) == public_before
    assert command_key(None, "c2") not in await store.seen("g-stale")


async def test_a_command_id_appends_once(any_redis: Redis, keys: Keys) -> None:
    store = EventStore(any_redis, keys)
    events, _ = game_events("g-dup")
    first = await store.append(Append("g-dup", 0, encoded(events[:2]), "same"))
    again = await store.append(Append("g-dup", 2, encoded(events[2:4]), "same"))
    assert first.status == "ok"
    assert (again.status, again.version) == ("duplicate", 2)
    assert await any_redis.xlen(keys.log("g-dup")) == 2


@asynccontextmanager
async def _own_redis() -> AsyncIterator[Redis]:
    """A client of a Redis of the test's own, whose ``commandstats`` count only its calls."""
    async with OwnRedis() as server:
        await server.start()
        redis = connect(server.url)
        try:
            yield redis
        finally:
            await redis.aclose()


async def _calls(redis: Redis) -> Counter[str]:
    """The server's commands since its statistics were reset, by name (``INFO
    commandstats``: those of scripts counted too)."""
    stats: Any = await redis.info("commandstats")
    return Counter({name.removeprefix("cmdstat_"): s["calls"] for name, s in stats.items()})


async def test_an_append_reads_its_games_meta_once_and_writes_it_once(keys: Keys) -> None:
    """The version and the command id's duplicate check are one read of the game's meta,
    and the version, the id and the pending requests one write (issue 24: the meta and a
    ``seen`` hash of the game were two reads and three writes an append); the ids read back
    with their versions. Counted on a Redis of the test's own (its ``commandstats``)."""
    async with _own_redis() as redis:
        store = EventStore(redis, keys)
        events, _ = game_events("g-count")
        created = await store.append(Append("g-count", 0, encoded(events[:2]), "c1"))
        assert created.status == "ok"
        await redis.config_resetstat()
        made = Append("g-count", 2, encoded(events[2:4]), "c2", seat=0, over=False)
        assert (await store.append(made)).status == "ok"
        calls = await _calls(redis)
        assert (calls["hget"] + calls["hmget"], calls["hset"]) == (1, 1)
        seen = await store.seen("g-count")
        assert seen == {command_key(None, "c1"): 2, command_key(0, "c2"): 4}
        pending = await store.pending("g-count")
        assert pending is not None and (pending.version, pending.over) == (4, False)
        assert (await store.load("g-count", GameCodec())).seen == seen


async def test_a_humans_clock_due_past_the_wake_horizon_is_set_without_reading_the_earliest(
    keys: Keys,
) -> None:
    """The bot player reads every deadline set's head at least every ``LONGEST_WAIT_S``:
    a human's clock due past the wake horizon is read by then, so the append sets it
    without reading its set's earliest (issue 24: a ``ZRANGE`` on nearly every human move)
    and publishes no wake-up; one due sooner than the horizon and the set's earliest still
    reads it and wakes the loop. Counted on a Redis of the test's own."""
    async with _own_redis() as redis:
        store = EventStore(redis, keys)
        events, _ = game_events("g-clock")
        await redis.hset(keys.seats("g-clock"), mapping={"0": "human", "1": "human"})
        await store.append(Append("g-clock", 0, encoded(events[:2]), "c1"))
        calls = []
        # an hour away (past the horizon); then due already (before it, and before the
        # set's earliest)
        for version, seat, due in ((2, 0, time.time() + 3600), (3, 1, time.time() - 60)):
            await redis.config_resetstat()
            request = Pending(seat, due, f'{{"seat":{seat}}}')
            made = encoded(events[version : version + 1])
            appended = Append("g-clock", version, made, f"c{version}", decisions=[request])
            assert (await store.append(appended)).status == "ok"
            counted = await _calls(redis)
            calls.append({n: counted[n] for n in ("zrange", "zadd", "publish")})
        assert calls == [
            {"zrange": 0, "zadd": 1, "publish": 0},
            {"zrange": 1, "zadd": 1, "publish": 1},
        ]
        clocks = await redis.zrange(keys.deadlines(keys.partition("g-clock")), 0, -1)
        assert clocks == [b'["g-clock",4,1]', b'["g-clock",3,0]']


async def test_a_game_begun_before_its_meta_kept_its_ids_still_refuses_their_duplicates(
    any_redis: Redis, keys: Keys
) -> None:
    """A game an engine of before left: its command ids in a ``seen`` hash of their own,
    its meta without the marker ``ids``. An id there is still a duplicate and is read with
    the game's new ones (its ``seen``, a load); a new id goes in the meta, not there."""
    store = EventStore(any_redis, keys)
    events, _ = game_events("g-old")
    await store.append(Append("g-old", 0, encoded(events[:2]), "c1"))
    meta, old = keys.meta("g-old"), command_key(None, "c1")
    await any_redis.hdel(meta, "ids", old)  # as an engine of before left it
    await any_redis.hset(keys.seen("g-old"), old, 2)
    again = await store.append(Append("g-old", 2, encoded(events[2:4]), "c1"))
    assert (again.status, again.version) == ("duplicate", 2)
    made = await store.append(Append("g-old", 2, encoded(events[2:4]), "c2"))
    assert (made.status, made.version) == ("ok", 4)
    assert await any_redis.hget(meta, command_key(None, "c2")) == b"4"
    assert await any_redis.hgetall(keys.seen("g-old")) == {old.encode(): b"2"}
    both = {old: 2, command_key(None, "c2"): 4}
    assert await store.seen("g-old") == both
    assert (await store.load("g-old", GameCodec())).seen == both


@pytest.mark.parametrize(
    ("first", "answered", "appended", "kept"),
    [
        # The engine decides a command again once its append is made (the call's reply was
        # lost, or the entry was handled twice): the duplicate's outcome adds no answer.
        (("c1", 0), {"status": "duplicate", "seat": 0, "version": 2}, "duplicate", "accepted"),
        # A command refused (answered) and sent again with the same id is appended later.
        (
            ("c0", None),
            {"status": "rejected", "seat": 1, "code": "x", "reason": "y"},
            "ok",
            "rejected",
        ),
    ],
    ids=["decided-again-after-its-append", "appended-after-an-answer"],
)
async def test_a_command_answered_and_appended_keeps_its_first_answer(
    any_redis: Redis,
    keys: Keys,
    first: tuple[str, int | None],
    answered: dict[str, object],
    appended: str,
    kept: str,
) -> None:
    """Whichever of its append and its answer comes first, a command's sender's answer
    stays the first one (no second answer), and the list keeps its expiry."""
    store = EventStore(any_redis, keys)
    events, _ = game_events("g-c1")
    command_id, seat = first
    made = await store.append(Append("g-c1", 0, encoded(events[:2]), command_id, seat=seat))
    assert made.status == "ok"
    result = CommandResult.model_validate({"command_id": "c1", "game_id": "g-c1", **answered})
    assert await store.finish("g-c1", keys.partition("g-c1"), result, None, version=2)
    again = await store.append(Append("g-c1", 2, encoded(events[2:4]), "c1", seat=result.seat))
    assert again.status == appended
    key = keys.result("g-c1", result.seat, "c1")
    answers = await any_redis.lrange(key, 0, -1)
    assert [CommandResult.model_validate_json(a).status for a in answers] == [kept]
    assert await any_redis.ttl(key) > 0


async def test_one_call_appends_a_batch_of_every_kind_of_append(
    any_redis: Redis, keys: Keys
) -> None:
    """Each append names only the keys it writes (a result, a snapshot, a new game's
    partition sets only when it has them): a batch mixing them writes each to its own
    keys, and its conflicts and duplicates leave the appends after them in place."""
    store = EventStore(any_redis, keys)
    a, _ = game_events("g-mix-a", seed=3)
    b, _ = game_events("g-mix-b", seed=4)
    c, _ = game_events("g-mix-c", seed=5)
    await store.append(Append("g-mix-b", 0, encoded(b[:2]), "b0"))
    await store.append(Append("g-mix-c", 0, encoded(c[:2]), "c0"))
    appends = [
        Append("g-mix-a", 0, encoded(a[:2]), "a0", entry=None, snapshot='{"s":1}'),
        Append("g-mix-b", 5, encoded(b[2:3]), "b1"),  # stale: a conflict
        Append("g-mix-c", 2, encoded(c[2:3]), "c0"),  # its id seen: a duplicate
        Append("g-mix-b", 2, encoded(b[2:4]), "", decisions=[Pending(0, 9.5, '{"d":1}')]),
        Append("g-mix-c", 2, encoded(c[2:4]), "c1", seat=2, snapshot='{"s":2}'),
    ]
    results = await store.append_many(appends)
    assert [(r.status, r.version) for r in results] == [
        ("ok", 2),
        ("conflict", 2),
        ("duplicate", 2),
        ("ok", 4),
        ("ok", 4),
    ]
    assert "g-mix-a" in await store.game_ids(keys.partition("g-mix-a"))
    assert await any_redis.hgetall(keys.snapshot("g-mix-a")) == {b"v": b"2", b"s": b'{"s":1}'}
    assert await any_redis.hgetall(keys.snapshot("g-mix-c")) == {b"v": b"4", b"s": b'{"s":2}'}
    assert not await any_redis.exists(keys.snapshot("g-mix-b"))
    for game, seat, command, version in [("g-mix-a", None, "a0", 2), ("g-mix-c", 2, "c1", 4)]:
        answer = await any_redis.lindex(keys.result(game, seat, command), 0)
        assert CommandResult.model_validate_json(answer).version == version
    decisions = await any_redis.xrange(keys.decisions(keys.partition("g-mix-b")))
    assert [fields[b"r"] for _, fields in decisions] == [b'{"d":1}']
    assert not await any_redis.exists(keys.deadlines(keys.partition("g-mix-b")))  # no seats
    assert [e.version for e in await store.read("g-mix-b")] == [1, 2, 3, 4]


async def test_one_call_carries_events_with_and_without_secrets_each_whole(
    any_redis: Redis, keys: Keys
) -> None:
    """An append whose events have no secret sends their public JSON alone (a negative
    count), one with a secret sends (public, secret) pairs: in one call, each append's
    events land whole in its log with their secrets, and the decision requests after the
    events are read from where each form puts them."""
    store = EventStore(any_redis, keys)
    a, _ = game_events("g-sec-a", seed=3)
    b, _ = game_events("g-sec-b", seed=4)
    await store.append(Append("g-sec-b", 0, encoded(b[:2]), "b0"))
    plain, secret = encoded(b[2:5]), encoded(a[:3])
    assert not any(e.secret for e in plain) and any(e.secret for e in secret)
    args = EventStore(any_redis, keys)._call_args([Append("g-sec-b", 2, plain, "b1")])[1]
    assert args[4].split(" ")[3] == "-3"  # the count of the public JSON alone, in its head
    results = await store.append_many(
        [
            Append("g-sec-b", 2, plain, "b1", decisions=[Pending(0, 9.5, '{"d":"b"}')]),
            Append("g-sec-a", 0, secret, "a0", decisions=[Pending(1, 9.5, '{"d":"a"}')]),
        ]
    )
    assert [(r.status, r.version) for r in results] == [("ok", 5), ("ok", 3)]
    assert [(e.event_id, e.secret) for e in await store.read("g-sec-b")] == [
        (e.event_id, e.secret) for e in b[:5]
    ]
    assert [(e.event_id, e.secret) for e in await store.read("g-sec-a")] == [
        (e.event_id, e.secret) for e in a[:3]
    ]
    for game, request in [("g-sec-b", b'{"d":"b"}'), ("g-sec-a", b'{"d":"a"}')]:
        decisions = await any_redis.xrange(keys.decisions(keys.partition(game)))
        assert request in [fields[b"r"] for _, fields in decisions]


async def test_an_appends_numbers_and_entry_id_go_in_one_argument_the_script_reads(
    any_redis: Redis, keys: Keys
) -> None:
    """Each append's argument count, expected version, over flag, event count, entry id
    and game JSON travel as one head argument (an argument more costs a packing in the
    engine and a parse in Redis): the script reads each from it, so the entry is
    acknowledged (a held one is not), the over flag lands in the meta ('-': none given),
    every event and request is where its count says and a human seat's clock is the
    member ``[game, version, seat]`` made of the game's JSON."""
    store = EventStore(any_redis, keys)
    events, _ = game_events("g-head", seed=6)
    stream = keys.commands(keys.partition("g-head"))
    await ensure_group(any_redis, stream, "engine")
    for _ in range(2):
        await any_redis.xadd(stream, {b"c": b"1"})
    read = await any_redis.xreadgroup("engine", "e", {stream: ">"})
    first, second = (i.decode() for i, _ in read[0][1])
    p = keys.partition("g-head")
    made = Append(
        "g-head",
        0,
        encoded(events[:2]),
        "h0",
        entry=(p, first),
        decisions=[Pending(0, 9.5, '{"d":0}')],
        over=False,
    )
    held = Append("g-head", 2, encoded(events[2:3]), "h1", entry=(p, second), held=True)
    args = store._call_args([made, held])[1]
    assert not any(e.secret for e in held.events)  # its public JSON alone: a negative count
    assert all(e.secret for e in made.events)  # (public, secret) pairs
    assert args[4] == f'12 0 0 2 {first} "g-head"' and args[4 + 13] == '5 2 - -1  "g-head"'
    await any_redis.hset(keys.seats("g-head"), "0", "human")  # its clock starts
    results = await store.append_many([made, held])
    assert [(r.status, r.version) for r in results] == [("ok", 2), ("ok", 3)]
    pending = await any_redis.xpending_range(stream, "engine", "-", "+", 10)
    assert [x["message_id"].decode() for x in pending] == [second]  # held: not acknowledged
    assert await any_redis.hget(keys.meta("g-head"), "over") == b"0"
    assert [e.event_id for e in await store.read("g-head")] == [e.event_id for e in events[:3]]
    decisions = await any_redis.xrange(keys.decisions(p))
    assert [fields[b"r"] for _, fields in decisions] == [b'{"d":0}']
    clocks = await any_redis.zrange(keys.deadlines(p), 0, -1, withscores=True)
    assert clocks == [(b'["g-head",2,0]', 9.5)]  # the member made of the head's game JSON


async def test_with_durability_a_sender_is_answered_once_a_replica_has_the_append(
    redis_cluster_url: str, keys: Keys
) -> None:
    """On the cluster (a replica per master) the append waits for one replica, then the
    sender's result is stored; appends of many partitions (several masters) in one batch."""
    client = connect(redis_cluster_url)
    store = EventStore(client, keys, replicas=1, replica_timeout_ms=5000)
    games = [f"g-durable-{i}" for i in range(8)]
    try:
        batch = [Append(g, 0, encoded(game_events(g)[0][:2]), f"c-{g}") for g in games]
        results = await store.append_many(batch)
        assert [(r.status, r.answered) for r in results] == [("ok", True)] * len(games)
        sender = CommandSender(client, keys)
        for g in games:
            answer = await sender.result(g, f"c-{g}", seat=None)
            assert answer is not None and (answer.status, answer.version) == ("accepted", 2)
    finally:
        await delete_namespace(client, keys.prefix)
        await client.aclose()


async def test_without_the_replicas_the_append_stays_unanswered(redis: Redis, keys: Keys) -> None:
    """One Redis with no replica: the append is in the log, but the sender gets no result
    (it times out and may ask again), because the durability asked for is not there."""
    assert (await redis.info("replication"))["connected_slaves"] == 0
    store = EventStore(redis, keys, replicas=1, replica_timeout_ms=50)
    events, _ = game_events("g-alone")
    result = await store.append(Append("g-alone", 0, encoded(events[:2]), "c1"))
    assert (result.status, result.version, result.answered) == ("ok", 2, False)
    assert await store.version("g-alone") == 2
    assert await CommandSender(redis, keys).result("g-alone", "c1", seat=None) is None


async def test_racing_appenders_never_share_a_version(any_redis: Redis, keys: Keys) -> None:
    """Many writers append at the same expected version at once: exactly one wins each
    round, and the log's versions stay gap-free."""
    store = EventStore(any_redis, keys)
    events, _ = game_events("g-race")
    await store.append(Append("g-race", 0, encoded(events[:1]), "c0"))
    version = 1
    for round_ in range(10):
        candidates = [
            Append(
                "g-race",
                version,
                encoded([events[1].model_copy(update={"version": version + 1})]),
                f"r{round_}-{w}",
            )
            for w in range(6)
        ]
        results = await asyncio.gather(*(store.append(a) for a in candidates))
        assert sum(r.status == "ok" for r in results) == 1
        version += 1
    entries = await any_redis.xrange(keys.log("g-race"))
    assert [int(eid.split(b"-")[0]) for eid, _ in entries] == list(range(1, version + 1))


async def test_public_stream_is_redacted_one_entry_per_command(
    any_redis: Redis, keys: Keys
) -> None:
    """The partition stream gets each command's events as one entry, without server-only
    values; the game's own log keeps them."""
    store = EventStore(any_redis, keys)
    events, _ = game_events("g-redact")
    await store.append(Append("g-redact", 0, encoded(events[:4]), "c1"))
    await store.append(Append("g-redact", 4, encoded(events[4:]), "c2"))
    entries = await any_redis.xrange(keys.events(keys.partition("g-redact")))
    assert [(int(f[b"v"]), int(f[b"n"])) for _, f in entries] == [
        (4, 4),
        (len(events), len(events) - 4),
    ]
    docs = [doc for _, f in entries for doc in json.loads(f[b"e"])]
    assert [doc["version"] for doc in docs] == list(range(1, len(events) + 1))
    assert all(doc["secret"] is None for doc in docs)
    assert any(e.secret for e in events)
    assert [e.secret for e in await store.read("g-redact")] == [e.secret for e in events]


def test_encoded_events_load_back_as_the_same_envelope() -> None:
    events, _ = game_events("g-encode")
    for event in events:
        public, secret = event.encode()
        raw = json.loads(public)
        assert raw["secret"] is None
        if secret:
            raw["secret"] = json.loads(secret)
        assert load_event(raw) == event


async def test_snapshot_plus_later_events_equals_the_full_replay(
    any_redis: Redis, keys: Keys
) -> None:
    store = EventStore(any_redis, keys)
    codec = GameCodec()
    events, state = game_events("g-snap")
    await store.append(Append("g-snap", 0, encoded(events[:5]), "c1"))
    partial = aod.replay(RULES, [aod.Event(e.type, e.data, e.secret) for e in events[:5]])
    await store.save_snapshots([("g-snap", 5, partial.to_snapshot())])
    await store.append(Append("g-snap", 5, encoded(events[5:]), "c2"))
    loaded = await store.load("g-snap", codec)
    assert loaded.version == len(events)
    assert loaded.state is not None
    assert loaded.state.state_hash() == state.state_hash()
    assert loaded.seen == {command_key(None, "c1"): 5, command_key(None, "c2"): len(events)}


async def test_a_group_created_after_events_were_written_sees_them_all(
    any_redis: Redis, keys: Keys
) -> None:
    store = EventStore(any_redis, keys)
    events, _ = game_events("g-late")
    await store.append(Append("g-late", 0, encoded(events), "c1"))
    stream = keys.events(keys.partition("g-late"))
    await ensure_group(any_redis, stream, "late-projection")
    await ensure_group(any_redis, stream, "late-projection")  # idempotent
    got: list[Delivery] = []

    async def handle(deliveries: list[Delivery]) -> None:
        got.extend(deliveries)

    broker = Broker(any_redis)
    consumer = GroupConsumer(broker, any_redis, "late-projection", "p1", keys, handle)
    await broker.start()
    try:
        await consumer.subscribe(stream)  # a FastStream subscriber, reading from here on
        await wait_for(lambda: _some(got))
    finally:
        await consumer.close()
        await broker.stop()
    versions = [doc["version"] for d in got for doc in json.loads(d.fields[b"e"])]
    assert versions == list(range(1, len(events) + 1))


async def _some(items: list[Delivery]) -> bool:
    return bool(items)


def test_old_envelopes_are_upcast_on_load() -> None:
    """A stored event of an older envelope schema loads upcast, however the store reads it:
    its stored JSON, with and without a server-only part. (A game's payload versions are the
    game's: tests/games/test_event_versions.py.)"""
    old = {"game_id": "g", "version": 1, "type": "game_created", "schema_version": 1}
    old["data"] = {"ruleset": "standard", "options": {}, "players": ["a"]}
    stored = json.dumps(old).encode()
    read = read_event(stored)
    assert read.data["game"] == "age_of_discovery" and read.schema_version == SCHEMA_VERSION
    hidden = read_event(stored, b'{"drawn": 7}')
    assert hidden.data == read.data and hidden.secret == {"drawn": 7}
    with pytest.raises(ValueError, match="schema version 0"):
        load_event({**old, "schema_version": 0})


def test_logs_of_schema_1_are_of_the_default_game() -> None:
    """Logs written before games had names load as The Age of Discovery; other events of
    schema 1 are unchanged."""
    created = {
        "game_id": "g",
        "version": 1,
        "type": "game_created",
        "data": {"ruleset": "standard", "options": {}, "players": ["a", "b"]},
        "schema_version": 1,
    }
    assert load_event(created).data["game"] == "age_of_discovery"
    other = {"game_id": "g", "version": 2, "type": "money", "data": {"seat": 0, "amount": 3}}
    assert load_event({**other, "schema_version": 1}).data == other["data"]


def test_the_stored_answer_of_an_append_is_a_command_result() -> None:
    """The append script stores the sender's answer as JSON written without the model: it
    must read back as the ``CommandResult`` the sender expects, field for field."""
    events = [EncodedEvent('{"a":1}', ""), EncodedEvent('{"b":2}', "")]
    append = Append("g-1", 4, events, command_id="c-1")
    stored_json = EventStore._result_json(append)
    expected = CommandResult(command_id="c-1", game_id="g-1", status="accepted", version=6)
    assert CommandResult.model_validate_json(stored_json) == expected
    assert stored_json == expected.model_dump_json()


async def test_an_append_keeps_its_decision_requests_in_the_meta_at_its_version(
    any_redis: Redis, keys: Keys
) -> None:
    """The requests an append gives as every seat's are kept with its version and whether
    the game is over (what HTTP's legal commands are answered from); a later append that
    gives none leaves nothing read at its version (the reader falls back to the views)."""
    store = EventStore(any_redis, keys)
    events, _ = game_events("g-pending")
    assert await store.pending("g-pending") is None  # no game
    first = '{"seat":1,"version":3,"legal_commands":[{"type":"pass"}]}'
    append = Append("g-pending", 0, encoded(events[:3]), "c1", decisions=[Pending(1, 9.5, first)])
    append.over = False
    await store.append(append)
    pending = await store.pending("g-pending")
    assert pending is not None and (pending.version, pending.over) == (3, False)
    assert pending.legal(1) == [{"type": "pass"}] and pending.legal(0) == []
    await store.append(Append("g-pending", 3, encoded(events[3:4]), "c2"))  # none given
    assert await store.pending("g-pending") is None
    ended = Append("g-pending", 4, encoded(events[4:5]), "c3")
    ended.over = True
    await store.append(ended)
    pending = await store.pending("g-pending")
    assert pending is not None
    assert (pending.version, pending.over, pending.requests) == (5, True, [])


def test_equal_reads_of_the_pending_decisions_are_parsed_once() -> None:
    """An HTTP move reads the game's meta twice at one version (its answer's legal commands,
    the other seat's GET /legal): the second read's requests are the first's, unparsed; a
    read of other requests is parsed anew."""
    raw = b'[{"seat":0,"version":3,"legal_commands":[{"type":"pass"}]}]'
    first = pending_of([b"3", b"3", b"0", raw])
    again = pending_of([b"3", b"3", b"0", bytes(bytearray(raw))])  # equal, another object
    assert first is not None and again is not None and again.requests is first.requests
    other = pending_of([b"4", b"4", b"1", raw.replace(b"pass", b"move")])
    assert other is not None and other.legal(0) == [{"type": "move"}] and other.over
    assert first.legal(0) == [{"type": "pass"}]
