"""Retention on a real Redis and SQL: streams trimmed behind every consumer group (on a Redis
Cluster too), finished games archived to SQL (verified before anything is deleted) and read
back from there."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import websockets
from redis.asyncio import Redis
from sqlalchemy import Engine, select

from services.engine import Engine as GameEngine
from services.engine.janitor import Janitor
from services.lobby.games import stream_events
from services.lobby.lobby import Lobby
from services.scoring.db import Result, table_of
from services.scoring.service import MARK_GROUP, ScoringService
from shared.bus import CommandSender, Keys
from shared.bus.retention import Trimmer, mark_read
from shared.eventstore import Append, Archive, EventStore, GameCodec
from tests.lobby.helpers import running_lobby

from .helpers import create_game, play_to_the_end, running_engine, settings_for, wait_for

pytestmark = pytest.mark.every_database  # SQL semantics: SQLite and PostgreSQL

STREAM_IDS = [f"{i}-0" for i in range(1, 11)]  # ids from 1970: older than any retention


@pytest.fixture
async def stream(any_redis: Redis, keys: Keys) -> AsyncIterator[str]:
    """A stream of ten old entries read by two groups, ``a`` and ``b``, not yet read."""
    name = keys.events(0)
    for entry_id in STREAM_IDS:
        await any_redis.xadd(name, {"n": entry_id}, id=entry_id)
    for group in ("a", "b"):
        await any_redis.xgroup_create(name, group, id="0")
    yield name


async def read_and_ack(redis: Redis, stream: str, group: str, count: int, skip: str = "") -> None:
    """``group`` reads ``count`` entries and acknowledges them all but ``skip``."""
    reply: Any = await redis.xreadgroup(group, "c1", {stream: ">"}, count=count)
    entries = reply[0][1]
    done = [entry_id for entry_id, _ in entries if entry_id.decode() != skip]
    await redis.xack(stream, group, *done)


async def ids(redis: Redis, stream: str) -> list[str]:
    entries: Any = await redis.xrange(stream)
    return [entry_id.decode() for entry_id, _ in entries]


async def test_entries_every_group_acknowledged_are_trimmed(any_redis: Redis, stream: str) -> None:
    for group in ("a", "b"):
        await read_and_ack(any_redis, stream, group, 10)
    young = (await any_redis.xadd(stream, {"n": "new"})).decode()  # type: ignore[union-attr]  # now: inside the retention
    for group in ("a", "b"):
        await read_and_ack(any_redis, stream, group, 10)
    [trimmed] = await Trimmer(any_redis, retention_s=60).trim([stream])
    assert await ids(any_redis, stream) == [young]  # acknowledged, but kept for the retention
    assert trimmed.removed == 10
    [again] = await Trimmer(any_redis, retention_s=0).trim([stream])
    assert await ids(any_redis, stream) == [] and again.removed == 1


async def test_an_entry_pending_in_one_group_survives(any_redis: Redis, stream: str) -> None:
    await read_and_ack(any_redis, stream, "a", 10)
    await read_and_ack(any_redis, stream, "b", 10, skip="4-0")  # b holds 4-0 unacknowledged
    [trimmed] = await Trimmer(any_redis, retention_s=0).trim([stream])
    assert await ids(any_redis, stream) == STREAM_IDS[3:]
    assert trimmed.needed_from == "4-0" and not trimmed.passed("4-0") and trimmed.passed("3-0")
    claimed: Any = await any_redis.xautoclaim(stream, "b", "c2", min_idle_time=0, start_id="0-0")
    assert [entry_id for entry_id, _ in claimed[1]] == [b"4-0"]  # still there to handle again
    await any_redis.xack(stream, "b", "4-0")
    await Trimmer(any_redis, retention_s=0).trim([stream])
    assert await ids(any_redis, stream) == []


async def test_a_group_behind_keeps_its_entries(any_redis: Redis, stream: str) -> None:
    await read_and_ack(any_redis, stream, "a", 10)
    await read_and_ack(any_redis, stream, "b", 3)  # b has handled 1-0 to 3-0 only
    [trimmed] = await Trimmer(any_redis, retention_s=0).trim([stream])
    assert await ids(any_redis, stream) == STREAM_IDS[3:] and trimmed.removed == 3
    await read_and_ack(any_redis, stream, "b", 10)
    await Trimmer(any_redis, retention_s=0).trim([stream])
    assert await ids(any_redis, stream) == []


async def test_a_stream_without_a_group_is_trimmed_by_the_retention_alone(
    any_redis: Redis, keys: Keys
) -> None:
    stream = keys.rejections(0)
    for entry_id in STREAM_IDS:
        await any_redis.xadd(stream, {"n": entry_id}, id=entry_id)
    young = (await any_redis.xadd(stream, {"n": "new"})).decode()  # type: ignore[union-attr]
    [trimmed] = await Trimmer(any_redis, retention_s=60).trim([stream])
    assert await ids(any_redis, stream) == [young]
    assert trimmed.needed_from is None and trimmed.passed(young)


async def test_a_reader_without_a_group_keeps_what_it_has_not_read(
    any_redis: Redis, stream: str
) -> None:
    """Scoring keeps its position in SQL and marks it as a group: entries wait for it."""
    for group in ("a", "b"):
        await read_and_ack(any_redis, stream, group, 10)
    await mark_read(any_redis, MARK_GROUP, {stream: "6-0"})
    await Trimmer(any_redis, retention_s=0).trim([stream])
    assert await ids(any_redis, stream) == STREAM_IDS[6:]
    await mark_read(any_redis, MARK_GROUP, {stream: "10-0"})  # moves an existing mark
    await Trimmer(any_redis, retention_s=0).trim([stream])
    assert await ids(any_redis, stream) == []


async def test_scoring_marks_its_checkpoints(redis: Redis, keys: Keys, database: Engine) -> None:
    """After a batch, the ``scoring`` group stands where scoring's SQL checkpoint does."""
    async with running_engine(redis, keys):
        await play_to_the_end(redis, keys, "g-scored", players=2, seed=3)
    scorer = ScoringService(redis, keys, database)
    await scorer.start()
    try:
        await wait_for(scorer.caught_up)
    finally:
        await scorer.close()
    stream = keys.events(keys.partition("g-scored"))
    groups = {g["name"].decode(): g for g in await redis.xinfo_groups(stream)}
    newest: Any = await redis.xrevrange(stream, count=1)
    last = newest[0][0]
    assert groups[MARK_GROUP]["last-delivered-id"] == last
    assert scorer.positions[stream] == last.decode()


def janitor_for(
    redis: Redis, keys: Keys, database: Engine, **overrides: float
) -> tuple[Janitor, Archive]:
    archive = Archive(database)
    settings = settings_for(keys, **{"archive_after_s": 0, **overrides})
    return Janitor(redis, keys, settings, archive, keys.all_partitions), archive


def game_keys(keys: Keys, game_id: str) -> list[str]:
    k = keys
    return [k.log(game_id), k.meta(game_id), k.seen(game_id), k.snapshot(game_id), k.seats(game_id)]


async def test_the_janitor_trims_behind_the_engine(redis: Redis, keys: Keys) -> None:
    """Commands the engine acknowledged go; the streams no group reads go by retention."""
    janitor = Janitor(redis, keys, settings_for(keys, stream_retention_s=0), None, lambda: [])
    async with running_engine(redis, keys):
        await play_to_the_end(redis, keys, "g-trim", players=2, seed=5)
    p = keys.partition("g-trim")
    assert await redis.xlen(keys.commands(p)) > 100
    await janitor.tend(p)
    for stream in (keys.commands(p), keys.events(p), keys.decisions(p)):
        assert await redis.xlen(stream) == 0, stream
    assert await redis.exists(keys.log("g-trim"))  # the log itself is never trimmed


async def test_a_finished_game_is_archived_once_every_group_passed_its_end(
    redis: Redis, keys: Keys, database: Engine
) -> None:
    game_id = "g-archive"
    p = keys.partition(game_id)
    seats = {"0": "bot:greedy", "1": "human", "2": "bot:random"}
    await redis.hset(keys.seats(game_id), mapping=seats)  # type: ignore[arg-type]
    await redis.xgroup_create(keys.events(p), "views", id="0", mkstream=True)
    async with running_engine(redis, keys):
        final_hash = await play_to_the_end(redis, keys, game_id)
    janitor, archive = janitor_for(redis, keys, database)
    live = EventStore(redis, keys)
    events = await live.read(game_id)

    await janitor.tend(p)  # the views group has not read the game's end: it stays
    assert await redis.exists(keys.log(game_id)) and archive.get(game_id) is None

    views: Any = await redis.xreadgroup("views", "v1", {keys.events(p): ">"})
    await redis.xack(keys.events(p), "views", *[entry_id for entry_id, _ in views[0][1]])
    await janitor.tend(p)

    row = archive.get(game_id)
    assert row is not None and (row.version, row.final_hash) == (len(events), final_hash)
    assert json.loads(row.seats) == seats
    assert not await redis.exists(*game_keys(keys, game_id))
    assert await redis.sismember(keys.archived(p), game_id)
    assert not await redis.sismember(keys.games(p), game_id)
    assert not await redis.sismember(keys.finished(p), game_id)

    store = EventStore(redis, keys, archive=archive)  # reads fall back to the archive
    assert await store.read(game_id) == events
    assert await store.read(game_id, after=10) == events[10:]
    assert (await store.read_many({game_id: (3, 7)}))[game_id] == events[3:7]
    past, ids = await store.read_past({game_id: (3, 7)})
    assert past[game_id] == events[3:7] and ids[game_id] == events[2].event_id
    loaded = await store.load(game_id, GameCodec())
    assert GameCodec().state_hash(loaded.state) == final_hash
    played = (await store.seats([game_id]))[game_id].players
    assert played == {
        0: "bot:greedy",
        1: "human",
        2: "bot:random",
    }
    assert await live.read(game_id) == []  # without the archive: nothing


async def test_an_archived_game_id_is_never_reused(
    redis: Redis, keys: Keys, database: Engine
) -> None:
    async with running_engine(redis, keys):
        await play_to_the_end(redis, keys, "g-once", players=2, seed=8)
    janitor, archive = janitor_for(redis, keys, database)
    await janitor.round()
    assert archive.has("g-once")
    again = create_game("g-once")
    store = EventStore(redis, keys, archive=archive)
    result = await store.append(Append("g-once", 0, [], again.command_id))
    assert result.status == "archived"  # the append script itself refuses the id
    engine = GameEngine(redis, settings_for(keys), keys, archive=archive)
    stop = asyncio.Event()
    task = asyncio.create_task(engine.run(stop))
    try:
        answer = await CommandSender(redis, keys).execute(again, timeout_s=10)
    finally:
        stop.set()
        await task
    assert (answer.status, answer.code) == ("rejected", "game_exists")  # loaded from SQL


async def test_a_crash_between_writing_and_deleting_loses_nothing(
    redis: Redis, keys: Keys, database: Engine
) -> None:
    """The row written and verified, then a crash before the delete: the rerun finds the
    row, verifies it again, and deletes."""
    async with running_engine(redis, keys):
        await play_to_the_end(redis, keys, "g-crash", players=2, seed=6)
    janitor, archive = janitor_for(redis, keys, database)
    finished = await EventStore(redis, keys).finished_log("g-crash")
    assert finished is not None
    first = archive.keep(finished)  # steps 1 and 2 only
    assert await redis.exists(keys.log("g-crash"))
    await janitor.round()
    assert not await redis.exists(keys.log("g-crash"))
    again = archive.get("g-crash")
    assert again is not None and again.archived_at == first.archived_at  # the same row
    store = EventStore(redis, keys, archive=archive)
    assert await store.read("g-crash") == finished.events


async def test_an_archive_that_does_not_verify_deletes_nothing(
    redis: Redis, keys: Keys, database: Engine
) -> None:
    async with running_engine(redis, keys):
        await play_to_the_end(redis, keys, "g-bad-hash", players=2, seed=7)
    await redis.hset(keys.meta("g-bad-hash"), "final_hash", "not-the-hash")
    janitor, _ = janitor_for(redis, keys, database)
    await janitor.round()
    assert janitor.stats["refused"] == 1 and janitor.stats["archived"] == 0
    # log, meta, snapshot: no seats hash (no lobby), no seen hash (the ids are in the meta)
    assert await redis.exists(*game_keys(keys, "g-bad-hash")) == 3


async def test_a_game_waits_out_the_grace_period(
    redis: Redis, keys: Keys, database: Engine
) -> None:
    async with running_engine(redis, keys):
        await play_to_the_end(redis, keys, "g-recent", players=2, seed=2)
    janitor, archive = janitor_for(redis, keys, database, archive_after_s=3600)
    await janitor.round()
    assert await redis.exists(keys.log("g-recent")) and not archive.has("g-recent")


async def test_scoring_rebuilds_an_archived_game(
    redis: Redis, keys: Keys, database: Engine
) -> None:
    """A rebuild finds archived games, their logs and who played them in the archive."""
    game_id = "g-rebuilt"
    seats = {"0": "bot:greedy", "1": "human"}
    await redis.hset(keys.seats(game_id), mapping=seats)  # type: ignore[arg-type]
    async with running_engine(redis, keys):
        await play_to_the_end(redis, keys, game_id, players=2, seed=12)
    janitor, _ = janitor_for(redis, keys, database)
    await janitor.round()
    assert not await redis.exists(keys.log(game_id))
    report = await ScoringService(redis, keys, database).rebuild()
    assert report.games == 1
    results = table_of(Result)
    with database.connect() as conn:
        kinds = dict(conn.execute(select(results.c.seat, results.c.seat_kind)).all())
    assert kinds == {0: "bot:greedy", 1: "human"}


async def test_the_websocket_catch_up_serves_an_archived_game(
    redis: Redis, keys: Keys, database: Engine
) -> None:
    """A spectator connecting after the game was archived gets every public event, to
    the end of the game, from the archive."""
    async with running_engine(redis, keys):
        await play_to_the_end(redis, keys, "g-watched", players=2, seed=9)
    events = await EventStore(redis, keys).read("g-watched")
    janitor, _ = janitor_for(redis, keys, database)
    await janitor.round()
    assert not await redis.exists(keys.log("g-watched"))

    lobby = Lobby(redis, keys, database, settings_for(keys, secret="test"))
    sent: list[str] = []

    async def send(text: str) -> None:
        sent.append(text)

    try:
        await asyncio.wait_for(stream_events(lobby, "g-watched", None, 0, send), timeout=30)
    finally:
        await lobby.fanout.close()
    public = [e.encode().public for e in events if e.visible_to(None)]
    assert sent == public and json.loads(sent[-1])["type"] == "game_ended"


async def test_caravel_up_archives_a_finished_table_and_still_serves_it(
    redis: Redis, redis_url: str, keys: Keys, database_url: str, tmp_path: Path
) -> None:
    """The whole deployment: a bots' table plays to its end, the janitor of `caravel up`
    archives it once the views and scoring have passed its end, and the table, the
    WebSocket and the result still answer for it."""
    async with running_lobby(
        redis_url, keys, database_url, tmp_path, archive_after_s="0"
    ) as client:
        body = {"seats": 2, "bots": {"0": "greedy", "1": "random"}}
        game_id = (await client.post("/tables", json=body)).json()["id"]
        p = keys.partition(game_id)

        async def archived() -> bool:
            return bool(await redis.sismember(keys.archived(p), game_id))

        await wait_for(archived, timeout_s=120)
        assert not await redis.exists(keys.log(game_id))
        table = (await client.get(f"/tables/{game_id}")).json()
        url = f"ws://{client.base_url.host}:{client.base_url.port}/games/{game_id}/ws"
        async with websockets.connect(url) as ws:
            watched = [json.loads(message) async for message in ws]
        result = await client.get(f"/games/{game_id}/result")
    assert table["status"] == "finished"
    versions = [event["version"] for event in watched]
    assert versions == sorted(set(versions)) and versions[0] == 1
    assert watched[-1]["type"] == "game_ended"
    assert result.status_code == 200, result.text
