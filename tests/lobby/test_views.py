"""The views projection on a real Redis: it follows the engine and never replays a log."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import structlog
from redis.asyncio import Redis
from redis.exceptions import ConnectionError

from benchmarks.chaos_faults import SingleRedis
from services.lobby.views import GROUP, Projected, ViewProjector
from shared.bus import BODY, CommandSender, Keys, connect, ensure_group
from shared.bus.retention import Trimmer, stream_id
from shared.bus.scripts import Batch
from shared.bus.wants import KEPT_S
from shared.contracts import ViewWant
from shared.eventstore import Append, EventStore, GameCodec
from shared.games import age_of_discovery as aod
from shared.views import ViewWaiter, read_view, seat_part

from ..backbone.helpers import (
    RULES,
    create_game,
    play_locally,
    read_as,
    running_engine,
    running_projector,
    wait_for,
    want_views,
)
from ..backbone.test_eventstore import encoded, game_events
from ..cluster import OwnRedis, redis_server
from ..conftest import missing_program

WRITES = ("fcall", "function|load", "evalsha", "eval")  # the view script's calls


async def _drain(projector: ViewProjector) -> None:
    """Wait until the running projector has projected every notification."""
    await wait_for(projector.consumer.caught_up)


async def test_projected_views_equal_the_rules_views_for_every_seat(
    redis: Redis, keys: Keys
) -> None:
    """After every command, the stored view of each seat (and of a spectator) is exactly
    what ``view`` / ``seat_view`` of the engine's state gives: no more, no less."""
    commands, _ = play_locally("g-view", players=3, seed=6, limit=60)
    sender = CommandSender(redis, keys)
    await want_views(redis, keys, "g-view")
    async with running_engine(redis, keys), running_projector(redis, keys) as projector:
        state, _ = aod.new_game(RULES, None, 3, 6)
        for i, command in enumerate(commands):
            result = await sender.execute(command)
            assert result.status == "accepted"
            if i:
                aod.decide_into(state, aod.command_from_dict(command.rules_command()))
            if i % 7 == 0 or i == len(commands) - 1:
                await _drain(projector)
                assert await read_view(redis, keys, "g-view", None) == aod.view(state, None)
                for seat in range(3):
                    projected = await read_view(redis, keys, "g-view", seat)
                    assert projected == aod.view(state, seat)


async def test_a_new_projector_catches_up_and_views_only_move_forward(
    redis: Redis, keys: Keys
) -> None:
    """A projector started late (or a second one) sees every notification from the start,
    and an older view never overwrites a newer one."""
    commands, final = play_locally("g-late-view", players=2, seed=2, limit=30)
    sender = CommandSender(redis, keys)
    async with running_engine(redis, keys):
        for command in commands:
            await sender.execute(command)
    await want_views(redis, keys, "g-late-view")
    async with running_projector(redis, keys, consumer="first") as first:
        await _drain(first)
    stored = await read_view(redis, keys, "g-late-view", None)
    assert stored is not None and stored["version"] == final.version
    assert stored == aod.view(final, None)
    # An outdated writer (a projector that lags behind) cannot roll the view back.
    stale = ViewProjector(redis, keys, consumer="stale")
    stale.games["g-late-view"] = Projected.of(aod.new_game(RULES, None, 2, 2)[0], 1)
    async with Batch(redis) as batch:
        stale._store_view(batch, "g-late-view")
        await batch.execute()
    assert await read_view(redis, keys, "g-late-view", None) == aod.view(final, None)


async def test_views_never_carry_hidden_values(redis: Redis, keys: Keys) -> None:
    """The stored documents contain no face-down token, pile order or generator state: they
    are identical for the engine's state and for a resampled twin."""
    commands, final = play_locally("g-hidden", players=4, seed=11, limit=40)
    sender = CommandSender(redis, keys)
    await want_views(redis, keys, "g-hidden")
    async with running_engine(redis, keys):
        for command in commands:
            await sender.execute(command)
    async with running_projector(redis, keys) as projector:
        await _drain(projector)
    raw = await redis.hgetall(keys.view("g-hidden"))
    twin = aod.determinize(final, 99)
    assert json.loads(raw[b"public"]) == aod.view(twin, None)
    for seat in range(4):
        assert await read_view(redis, keys, "g-hidden", seat) == aod.view(twin, seat)


async def test_what_a_dead_projector_left_pending_is_projected_by_a_live_one(
    redis: Redis, keys: Keys
) -> None:
    """A projector read a game's first notification and died: a live one reclaims it once
    idle for the claim time, and the game's view appears."""
    stream = keys.events(keys.partition("g-lost"))
    async with running_engine(redis, keys):
        await CommandSender(redis, keys).execute(create_game("g-lost", players=3))
    await ensure_group(redis, stream, GROUP)
    assert len(await read_as(redis, GROUP, "dead-projector", stream, 10)) == 1  # never projected
    stop = asyncio.Event()
    live = ViewProjector(redis, keys, claim_idle_ms=200)
    live.wanted["g-lost"] = time.time() + 60  # wanted, though never asked on the stream:
    projecting = asyncio.create_task(live.run(stop))  # only the reclaimed entry projects it

    async def projected() -> bool:
        return await read_view(redis, keys, "g-lost", None) is not None

    await wait_for(projected)
    stop.set()
    await projecting
    view = await read_view(redis, keys, "g-lost", None)
    log = await EventStore(redis, keys).read("g-lost")
    assert view is not None and view["version"] == log[-1].version


async def test_a_seat_view_that_drops_or_changes_spectator_fields_reads_back_whole(
    redis: Redis, keys: Keys
) -> None:
    """Any game's seat view, stored as its difference from the spectator's, reads back as
    it was: fields added, changed and dropped (The Age of Discovery never drops one)."""
    public = {"seat": None, "board": [1, 2], "hidden_count": 3, "version": 7}
    seat_view = {"seat": 1, "board": [1, 2], "hand": ["a"], "version": 7}
    part = seat_part(public, seat_view)
    assert part == {"set": {"seat": 1, "hand": ["a"]}, "unset": ["hidden_count"]}
    mapping = {"version": 7, "public": json.dumps(public), "seat:1": json.dumps(part)}
    await redis.hset(keys.view("g-any"), mapping=mapping)  # type: ignore[arg-type]
    assert await read_view(redis, keys, "g-any", 1) == seat_view
    assert await read_view(redis, keys, "g-any", None) == public


async def test_the_view_script_writes_only_newer_views_on_one_redis_and_the_cluster(
    any_redis: Redis, keys: Keys
) -> None:
    """The projector's write (a script per game, in one batch over many partitions) on
    either: each game's views match its log; an older state does not overwrite them."""
    store = EventStore(any_redis, keys)
    games = {f"g-script-{i}": game_events(f"g-script-{i}", seed=i) for i in range(6)}
    for game_id, (events, _) in games.items():
        await store.append(Append(game_id, 0, encoded(events), "c1"))
    projector = ViewProjector(any_redis, keys)
    await projector.project(sorted(games))
    for game_id, (_, state) in games.items():
        assert await read_view(any_redis, keys, game_id, None) == aod.view(state, None)
        assert await read_view(any_redis, keys, game_id, 1) == aod.view(state, 1)
    stale = ViewProjector(any_redis, keys)
    stale.games["g-script-0"] = Projected.of(aod.new_game(RULES, None, 2, 2)[0], 1)
    async with Batch(any_redis) as batch:
        stale._store_view(batch, "g-script-0")
        await batch.execute()
    assert await read_view(any_redis, keys, "g-script-0", None) == aod.view(
        games["g-script-0"][1], None
    )


async def test_a_game_no_one_reads_is_not_projected_and_a_first_read_waits_for_its_log(
    redis: Redis, keys: Keys
) -> None:
    """The projection writes no view of a game whose views no one asked for (a table of
    humans on their sockets); the first read asks, and gets the view at the version the log
    had then (read-your-writes); from then on each event is projected."""
    commands, _ = play_locally("g-unread", players=2, seed=4, limit=30)
    sender = CommandSender(redis, keys)
    waiter = ViewWaiter(redis, keys, service="test")
    try:
        async with running_engine(redis, keys), running_projector(redis, keys) as projector:
            for command in commands[:20]:
                assert (await sender.execute(command)).status == "accepted"
            await _drain(projector)
            assert not await redis.exists(keys.view("g-unread"))
            state = await _logged_state(redis, keys, "g-unread")
            assert await waiter.read("g-unread", 1, 5) == aod.view(state, 1)
            for command in commands[20:]:
                assert (await sender.execute(command)).status == "accepted"
            await _drain(projector)
            state = await _logged_state(redis, keys, "g-unread")
            assert await read_view(redis, keys, "g-unread", 0) == aod.view(state, 0)
            assert await read_view(redis, keys, "g-unread", None) == aod.view(state, None)
    finally:
        await waiter.close()


async def test_a_view_wanted_for_one_read_is_projected_once(redis: Redis, keys: Keys) -> None:
    """A table's start waits for its first view and reads no more of it: that want makes
    one projection, not one per later event; a later read asks again, for good."""
    commands, _ = play_locally("g-once", players=2, seed=5, limit=12)
    sender = CommandSender(redis, keys)
    waiter = ViewWaiter(redis, keys, service="test")
    try:
        async with running_engine(redis, keys), running_projector(redis, keys) as projector:
            assert (await sender.execute(commands[0])).status == "accepted"
            first = await waiter.read_at("g-once", None, 1, 5, keep=False)
            assert first is not None and first["version"] >= 1
            for command in commands[1:]:
                assert (await sender.execute(command)).status == "accepted"
            await _drain(projector)
            assert await read_view(redis, keys, "g-once", None) == first
            state = await _logged_state(redis, keys, "g-once")
            assert await waiter.read("g-once", None, 5) == aod.view(state, None)
    finally:
        await waiter.close()


async def test_a_read_whose_wait_ran_out_asks_again(redis: Redis, keys: Keys) -> None:
    """A read asks for a game's views, but that ask is lost (here: the wants' stream gone
    before any projection read it) and its wait runs out: the next read asks again and gets
    the view at the log's version, instead of counting on the lost ask for minutes."""
    commands, _ = play_locally("g-lost", players=2, seed=7, limit=8)
    sender = CommandSender(redis, keys)
    waiter = ViewWaiter(redis, keys, service="test")
    try:
        async with running_engine(redis, keys):
            for command in commands:
                assert (await sender.execute(command)).status == "accepted"
            assert await waiter.read("g-lost", 0, 0.2) is None  # no projection runs
        await redis.delete(keys.view_wants(keys.partition("g-lost")))  # the ask is lost
        async with running_engine(redis, keys), running_projector(redis, keys):
            state = await _logged_state(redis, keys, "g-lost")
            assert await waiter.read("g-lost", 0, 10) == aod.view(state, 0)
    finally:
        await waiter.close()


async def test_a_read_that_finds_no_view_asks_again(redis: Redis, keys: Keys) -> None:
    """A game's first read comes before its game exists (a start answered 202): it asks for
    the views, the log has no version, so it waits for nothing and finds no view. That ask
    is lost (here: the wants' stream gone before any projection read it; in the chaos run a
    Redis killed before its AOF kept it). The game's later reads find no view either: each
    asks again (a miss re-projects), instead of answering 404 on the lost ask for minutes
    (issue 25: a stuck game whose view read 404 to the end of a chaos run)."""
    commands, _ = play_locally("g-miss", players=2, seed=7, limit=8)
    sender = CommandSender(redis, keys)
    waiter = ViewWaiter(redis, keys, service="test")
    try:
        assert await waiter.read("g-miss", 0, 0.2) is None  # no game yet
        async with running_engine(redis, keys):
            for command in commands:
                assert (await sender.execute(command)).status == "accepted"
        await redis.delete(keys.view_wants(keys.partition("g-miss")))  # the ask is lost
        async with running_engine(redis, keys), running_projector(redis, keys):
            state = await _logged_state(redis, keys, "g-miss")
            assert await waiter.read("g-miss", 0, 10) == aod.view(state, 0)
            assert await waiter.read_at("g-miss", None, 0, 0) == aod.view(state, None)
    finally:
        await waiter.close()


async def _logged_state(redis: Redis, keys: Keys, game_id: str) -> Any:
    """The game's state as its log has it now."""
    loaded = (await EventStore(redis, keys).load_many([game_id], GameCodec()))[game_id]
    assert loaded.state is not None
    return loaded.state


async def test_a_projector_trims_the_wants_that_ran_out_and_keeps_the_others(
    redis: Redis, keys: Keys
) -> None:
    """Wants are published through FastStream, which trims by length only: the projector
    drops the wants older than the longest want (``KEPT_S``) itself, and honours the rest."""
    stream = keys.view_wants(keys.partition("g-recent"))
    old = f"{int((time.time() - KEPT_S - 60) * 1000)}-0"
    body = ViewWant(game_id="g-old", keep_s=KEPT_S).encode()
    await redis.xadd(stream, {BODY: body}, id=old)  # written 11 minutes ago
    await want_views(redis, keys, "g-recent")
    async with running_projector(redis, keys) as projector:
        assert set(projector.wanted) == {"g-recent"}

        async def trimmed() -> bool:
            entries: Any = await redis.xrange(stream)
            return [ViewWant.decode(f[BODY]).game_id for _, f in entries] == ["g-recent"]

        await wait_for(trimmed)


async def test_the_projector_reads_only_partitions_with_a_wanted_game_and_holds_no_trim(
    redis: Redis, keys: Keys
) -> None:
    """The projection reads the event stream of a wanted game's partition only; a partition
    whose games are no longer wanted is let go, and read again from its tail when one is
    wanted again (its views follow the log). On a partition it does not read, its group's
    old position and a dead projector's pending entry are moved past the retention's edge,
    so the stream is trimmed as if the group did not read it."""
    commands, _ = play_locally("g-parked", players=2, seed=3, limit=12)
    read = keys.events(keys.partition("g-parked"))
    other = next(p for p in keys.all_partitions() if keys.events(p) != read)
    idle = keys.events(other)
    old_ms = int((time.time() - 3600) * 1000)
    for i in range(3):  # an hour old: a views group made then, one entry left pending
        await redis.xadd(idle, {"g": "g-gone", "v": i + 1, "n": 1}, id=f"{old_ms}-{i + 1}")
    await ensure_group(redis, idle, GROUP)
    assert len(await read_as(redis, GROUP, "dead-projector", idle, 1)) == 1
    sender = CommandSender(redis, keys)
    await want_views(redis, keys, "g-parked")
    running = running_projector(redis, keys, retention_s=0)
    async with running_engine(redis, keys), running as projector:
        for command in commands[:6]:
            assert (await sender.execute(command)).status == "accepted"
        assert projector.consumer.streams == [read]
        await projector.tidy()
        groups: Any = await redis.xinfo_groups(idle)
        [views] = [g for g in groups if g["name"] == GROUP.encode()]
        assert views["pending"] == 0
        assert stream_id(views["last-delivered-id"].decode()) > (old_ms, 3)
        await Trimmer(redis, retention_s=0).trim([idle])
        assert await redis.xlen(idle) == 0
        projector.wanted["g-parked"] = time.time() - 1  # its want ran out
        await projector.tidy()
        assert projector.consumer.streams == []
        for command in commands[6:9]:  # no one reads its views: not projected
            assert (await sender.execute(command)).status == "accepted"
        await want_views(redis, keys, "g-parked")
        await wait_for(_reading(projector, [read]))
        for command in commands[9:]:
            assert (await sender.execute(command)).status == "accepted"
        state = await _logged_state(redis, keys, "g-parked")

        async def projected() -> bool:
            return await read_view(redis, keys, "g-parked", 0) == aod.view(state, 0)

        await wait_for(projected)


def _reading(projector: ViewProjector, streams: list[str]) -> Any:
    async def reading() -> bool:
        return projector.consumer.streams == streams

    return reading


async def test_a_want_whose_projection_was_refused_is_projected_once_writes_come_back(
    tmp_path: Path,
) -> None:
    """A want read while Redis refuses writes for a while (a restart, a master short of
    replicas) is projected once they come back, with no further event or want: the
    follower had moved past it, and a game waiting on a decision gets no event, while its
    reader asks again only minutes later (issue 25: a game stuck in the chaos run, its
    seat's player waiting for a view that was never written)."""
    server = redis_server()
    if server is None:
        missing_program("redis-server", "redis-server 7 or later (/usr/bin/redis-server)")
    single = SingleRedis(server, folder=tmp_path).start()
    redis: Any = connect(single.url)
    keys = Keys("refused-want", partitions=1)
    try:
        await wait_for(lambda: _answers(redis))
        sender = CommandSender(redis, keys)
        async with running_projector(redis, keys) as projector:
            await want_views(redis, keys, "g-other")  # its partition read: no event comes again
            await wait_for(_reading(projector, [keys.events(0)]))
            async with running_engine(redis, keys):  # stopped: the view script alone is refused
                assert (await sender.execute(create_game("g-refused", 2, 3))).status == "accepted"
            await _drain(projector)
            assert not await redis.exists(keys.view("g-refused"))
            body = ViewWant(game_id="g-refused", keep_s=KEPT_S).encode()
            async with redis.pipeline(transaction=True) as pipe:  # refused from its read on
                pipe.xadd(keys.view_wants(0), {BODY: body})
                pipe.config_set("min-replicas-to-write", 1)
                await pipe.execute()

            async def refused() -> bool:
                stats: Any = await redis.info("commandstats")
                return any(stats.get(f"cmdstat_{c}", {}).get("rejected_calls", 0) for c in WRITES)

            await wait_for(refused)
            await redis.config_set("min-replicas-to-write", 0)
            state = await _logged_state(redis, keys, "g-refused")

            async def projected() -> bool:
                return await read_view(redis, keys, "g-refused", None) == aod.view(state, None)

            await wait_for(projected)
    finally:
        await redis.aclose()
        single.stop()


async def _answers(redis: Redis) -> bool:
    try:
        return bool(await redis.ping())
    except ConnectionError:
        return False


async def test_a_partitions_projection_does_not_wait_for_another_partitions(
    redis: Redis, keys: Keys
) -> None:
    """A projection under way in one partition (its shard failing over: each of its
    pipelines tried again 0.25 s later) holds up its own partition's games only. One lock
    for every projection made the views of every shard wait on it, and the bots, which
    play from the views, with them (issue 25: the other shards at a quarter of their
    events/s while a master failed over)."""
    games = [f"g-lock-{i}" for i in range(50)]
    first = games[0]
    other = next(g for g in games if keys.partition(g) != keys.partition(first))
    sender = CommandSender(redis, keys)
    async with running_engine(redis, keys):
        for game in (first, other):
            await sender.execute(create_game(game, players=2))
    projector = ViewProjector(redis, keys)
    busy = projector._projecting.setdefault(keys.partition(first), asyncio.Lock())
    async with busy:  # the first game's partition is being projected
        await asyncio.wait_for(projector.project([other]), 60)
        assert await read_view(redis, keys, other, None) is not None
        assert await read_view(redis, keys, first, None) is None


async def test_a_wait_on_a_followed_partition_reads_the_view_once_before_and_once_after(
    keys: Keys,
) -> None:
    """A bot's request comes with its event, before the projection has written the view:
    the read waits. With the partition's updates followed already (every wait after a
    process's first on it), it reads the view once before waiting and once when woken, and
    gets the view written meanwhile. It read three times (and parsed the first two views,
    too old) before, per bot move. Counted on a Redis of the test's own (its
    ``commandstats``: no other test's reads in them)."""
    game_id = "g-twice"
    async with OwnRedis() as server:
        await server.start()
        redis = connect(server.url)
        waiter = ViewWaiter(redis, keys, service="test")
        try:
            await _write_view(redis, keys, game_id, 1)
            assert (await waiter.read_at(game_id, 0, 2, 0.2))["version"] == 1  # type: ignore[index]
            await redis.config_resetstat()
            reading = asyncio.create_task(waiter.read_at(game_id, 0, 2, 10))
            await asyncio.sleep(0.3)
            assert not reading.done()
            await _write_view(redis, keys, game_id, 2)
            view = await asyncio.wait_for(reading, 10)
            assert view == {"board": 2, "mine": 0, "version": 2}
            stats: Any = await redis.info("commandstats")
            assert stats["cmdstat_hmget"]["calls"] == 2
        finally:
            await waiter.close()
            await redis.aclose()


async def test_a_partition_no_wait_used_lately_is_no_longer_followed(
    redis: Redis, keys: Keys
) -> None:
    """A lobby waits on a game's first view when its table starts, and went on reading
    every view update of that partition for nobody. Once no wait has used a partition for
    ``idle_s`` it is no longer read; the next wait on it follows it again, and is woken by
    the view written while it waits."""
    game_id = "g-idle"
    stream = keys.view_updates(keys.partition(game_id))
    waiter = ViewWaiter(redis, keys, service="test", idle_s=0.3)
    try:
        await _write_view(redis, keys, game_id, 1)
        await waiter.read_at(game_id, 0, 1, 0)  # asked once: later reads need not ask
        reading = asyncio.create_task(waiter.read_at(game_id, 0, 2, 10))
        await asyncio.sleep(0.1)
        await _write_view(redis, keys, game_id, 2)
        assert (await asyncio.wait_for(reading, 10))["version"] == 2  # type: ignore[index]
        assert stream in waiter._follower.streams
        for version in range(3, 30):  # updates nobody waits for, past idle_s
            await _write_view(redis, keys, game_id, version)
            await asyncio.sleep(0.05)
            if stream not in waiter._follower.streams:
                break
        assert stream not in waiter._follower.streams
        reading = asyncio.create_task(waiter.read_at(game_id, 0, version + 1, 10))
        await asyncio.sleep(0.1)
        assert stream in waiter._follower.streams and not reading.done()
        await _write_view(redis, keys, game_id, version + 1)
        view = await asyncio.wait_for(reading, 10)
        assert view is not None and view["version"] == version + 1
    finally:
        await waiter.close()


async def _write_view(redis: Redis, keys: Keys, game_id: str, version: int) -> None:
    """A view at ``version`` written as the projection writes one (public part, seat 0's
    part, the version), and announced on the partition's view updates."""
    fields = {
        "version": version,
        "public": json.dumps({"board": version}),
        "seat:0": json.dumps({"set": {"mine": 0}}),
    }
    await redis.hset(keys.view(game_id), mapping=fields)  # type: ignore[arg-type]
    await redis.xadd(keys.view_updates(keys.partition(game_id)), {"g": game_id, "v": version})


async def test_wants_streams_not_followed_are_logged_once_per_doubling_of_the_run(
    keys: Keys,
) -> None:
    """Wants streams that cannot be read (here a Redis not there yet: a port nothing
    answers on) are tried every :data:`FOLLOW_S`; their line is logged as every run of
    failed retries is (the 1st with its traceback, the 2nd, 4th, 8th...), not once a try
    (issue 25: once a second for as long as a shard was away). Once the Redis answers,
    every partition's wants are followed and the line stops."""
    server = OwnRedis()
    redis = connect(server.url)
    projector = ViewProjector(redis, keys)
    await projector.broker.start()  # no read: the subscribers come with the wants
    async with server:
        try:
            with structlog.testing.capture_logs() as logs:
                for _ in range(20):
                    assert len(await projector.follow_wants()) == keys.partitions
                lines = [e for e in logs if e["event"] == "wanted views not followed yet"]
                assert len(lines) == 5  # of 20 tries: the 1st, 2nd, 4th, 8th and 16th
                assert [e["failures"] for e in lines] == [1, 2, 4, 8, 16]
                assert lines[0]["exc_info"] is not None
                assert all(e["exc_info"] is None for e in lines[1:])
                await server.start()
                assert await projector.follow_wants() == []
                assert len(projector._wants.streams) == keys.partitions
                for _ in range(3):
                    assert await projector.follow_wants() == []
            assert len([e for e in logs if e["event"] == "wanted views not followed yet"]) == 5
        finally:
            await projector.close()
            await redis.aclose()
