"""A log that went back: a failover loses the tail of a game's log that the old master had
acknowledged, and the engine writes other events at the same versions. The views projection,
scoring and the WebSocket stream notice (the event they hold, in memory or stored, is no
longer in the log): the first two project the game again from the log, the stream stops for
its client to read the game again, instead of diverging from the log for good. The engine
gives those events ids of their own, and reloads a game it holds ahead of its log; the event
store keeps no snapshot and records no end the log has not reached.

The rollback is simulated on a real Redis (and the cluster): the log's tail is deleted and
the game's version set back, as the new master would have them, then another branch of the
game is appended through the event store."""

from __future__ import annotations

import asyncio
import json
import random
import uuid
from types import SimpleNamespace
from typing import Any

import pytest
from redis.asyncio import Redis
from sqlalchemy import Engine, select

from services.lobby.fanout import EventFanout
from services.lobby.games import LogWentBack, _start, stream_events
from services.scoring.db import (
    TABLES,
    Decision,
    Rating,
    RatingChange,
    Result,
    ScoredGame,
    Standing,
    table_of,
)
from services.scoring.service import ScoringService
from shared.bus import CommandSender, Keys
from shared.contracts import CommandEnvelope, EventEnvelope, new_id
from shared.eventstore import Append, EventStore, GameCodec
from shared.games import age_of_discovery as aod
from shared.views import read_view

from ..scoring.helpers import dump
from .helpers import (
    RULES,
    play_locally,
    running_engine,
    running_projector,
    stored,
    wait_for,
    want_views,
)

GAME = "g-rollback"


def commands_events(
    state: aod.GameState, version: int, seed: int, count: int | None, game: str = GAME
) -> list[list[EventEnvelope]]:
    """``count`` random legal commands (None: up to the game's end) from ``state``
    (advanced past them), as the events each appends after ``version``."""
    chooser = random.Random(seed)
    out = []
    while (count is None or len(out) < count) and aod.pending(state):
        seat = chooser.choice(aod.pending(state)).seat
        command = chooser.choice(aod.legal_commands(state, seat))
        cause = uuid.uuid4().hex
        events = []
        for event in aod.decide_into(state, command):
            version += 1
            events.append(stored(game, event, version, actor="player", cause=cause))
        out.append(events)
    return out


async def _append(store: EventStore, batches: list[list[EventEnvelope]]) -> None:
    for events in batches:
        expected = events[0].version - 1
        game = events[0].game_id
        result = await store.append(Append(game, expected, [e.encode() for e in events]))
        assert result.status == "ok", result


async def _roll_back(redis: Redis, keys: Keys, to_version: int, game: str = GAME) -> int:
    """Delete the log's entries above ``to_version``, set the game's version back and forget
    the commands seen after it, as a replica that lacked them and took over would hold them."""
    tail = await redis.xrange(keys.log(game), min=f"{to_version + 1}-0")
    await redis.xdel(keys.log(game), *[entry_id for entry_id, _ in tail])
    await redis.execute_command("XSETID", keys.log(game), f"{to_version}-0")  # never written
    await redis.hset(keys.meta(game), "version", to_version)
    seen = await EventStore(redis, keys).seen(game)  # kept in the meta (and an old game's seen)
    later = [command for command, version in seen.items() if version > to_version]
    if later:
        await redis.hdel(keys.meta(game), *later)
        await redis.hdel(keys.seen(game), *later)
    return len(tail)


async def test_views_and_scoring_project_again_a_game_whose_log_went_back(
    any_redis: Redis, keys: Keys, database: Engine
) -> None:
    store = EventStore(any_redis, keys)
    state, created = aod.new_game(RULES, None, 3, 11)
    setup = [stored(GAME, e, i) for i, e in enumerate(created, 1)]
    common = commands_events(state, len(setup), seed=1, count=6)
    cut = common[-1][-1].version
    branch = state.copy()
    lost = commands_events(state, cut, seed=2, count=12)  # acknowledged, then lost
    kept = commands_events(branch, cut, seed=3, count=2)  # fewer: the version goes back too
    assert kept[-1][-1].version < lost[-1][-1].version
    await _append(store, [setup, *common, *lost])

    scorer = ScoringService(any_redis, keys, database, batch_size=5)
    await scorer.start()
    await want_views(any_redis, keys, GAME)
    try:
        async with running_projector(any_redis, keys) as projector:

            async def caught_up(version: int) -> bool:
                view = await any_redis.hget(keys.view(GAME), "version")
                standings = await scorer.caught_up() and scorer.games[GAME].version == version
                return standings and view is not None and int(view) == version

            await wait_for(lambda: caught_up(lost[-1][-1].version))
            assert await _roll_back(any_redis, keys, cut) == sum(len(b) for b in lost)
            await _append(store, kept)
            await wait_for(lambda: caught_up(kept[-1][-1].version))
            await wait_for(projector.consumer.caught_up)
            for seat in (None, 0, 1, 2):
                assert await read_view(any_redis, keys, GAME, seat) == (aod.view(branch, seat))
    finally:
        await scorer.close()

    with database.connect() as conn:
        decisions = conn.execute(select(table_of(Decision).c.version)).all()
        standings = conn.execute(select(table_of(Standing)).order_by("seat")).all()
        version = conn.execute(select(table_of(ScoredGame).c.version)).scalar_one()
    assert len(decisions) == len(common) + len(kept)  # none of the lost branch's left
    assert [row.total for row in standings] == [r["total"] for r in aod.score(branch)]
    assert version == kept[-1][-1].version  # the standings' version (the game's row's)
    await _assert_as_rebuilt(any_redis, keys, database)


async def test_views_started_again_replace_the_view_of_a_log_that_went_back(
    redis: Redis, keys: Keys
) -> None:
    """A projector holds nothing in memory after a restart and loads the game from its log
    as it is now, at a version below the stored view's: the stored view names an event the
    log no longer has at its version, so the older view replaces it."""
    store = EventStore(redis, keys)
    state, setup = _a_game(16)
    branch = state.copy()
    lost = commands_events(state, len(setup), seed=9, count=8)
    kept = commands_events(branch, len(setup), seed=10, count=2)
    assert kept[-1][-1].version < lost[-1][-1].version
    await _append(store, [setup, *lost])
    await want_views(redis, keys, GAME)  # the restarted projector reads the want again
    async with running_projector(redis, keys):
        await wait_for(lambda: _viewed(redis, keys, lost[-1][-1].version))
    await _roll_back(redis, keys, len(setup))
    await _append(store, kept)
    async with running_projector(redis, keys) as projector:
        await wait_for(lambda: _viewed(redis, keys, kept[-1][-1].version))
        await wait_for(projector.consumer.caught_up)
    for seat in (None, 0, 1, 2):
        assert await read_view(redis, keys, GAME, seat) == (aod.view(branch, seat))


async def _viewed(redis: Redis, keys: Keys, version: int) -> bool:
    """The game's stored view is at ``version``."""
    stored_version = await redis.hget(keys.view(GAME), "version")
    return stored_version is not None and int(stored_version) == version


async def test_a_snapshot_of_a_state_the_log_lost_is_not_stored(
    any_redis: Redis, keys: Keys
) -> None:
    """The engine snapshots after an append; a failover between the two takes the append
    back, and the snapshot reaches the new master: it is not stored, so the game loads from
    its log as it is (a snapshot at a version the log has is stored as before)."""
    store = EventStore(any_redis, keys)
    state, setup = _a_game(18)
    branch = state.copy()
    lost = commands_events(state, len(setup), seed=13, count=3)
    await _append(store, [setup, *lost])
    await _roll_back(any_redis, keys, len(setup))
    await store.save_snapshots([(GAME, lost[-1][-1].version, state.to_snapshot())])
    assert not await any_redis.exists(keys.snapshot(GAME))
    loaded = await store.load(GAME, GameCodec())
    assert loaded.version == len(setup) and loaded.state is not None
    assert loaded.state.state_hash() == branch.state_hash()
    await store.save_snapshots([(GAME, len(setup), branch.to_snapshot())])
    assert int(await any_redis.hget(keys.snapshot(GAME), "v")) == len(setup)


async def test_the_end_of_a_game_the_log_lost_is_not_recorded(any_redis: Redis, keys: Keys) -> None:
    """The engine records a game's end after the append that ended it; a failover between
    the two takes the end back: the game is not recorded finished (its lobby table would be
    marked finished, and the archiver would try it), it goes on."""
    store = EventStore(any_redis, keys)
    state, setup = _a_game(19)
    branch = state.copy()
    lost = commands_events(state, len(setup), seed=14, count=None)  # to the end
    await _append(store, [setup, *lost])
    await _roll_back(any_redis, keys, len(setup))
    await store.record_final_hash(GAME, state.state_hash(), lost[-1][-1].version)
    assert await store.over([GAME]) == [] and await store.final_hash(GAME) is None
    kept = commands_events(branch, len(setup), seed=15, count=None)
    await _append(store, kept)
    await store.record_final_hash(GAME, branch.state_hash(), kept[-1][-1].version)
    assert await store.over([GAME]) == [GAME]
    assert await store.final_hash(GAME) == branch.state_hash()


async def test_the_engine_writes_again_at_lost_versions_events_of_other_ids(
    redis: Redis, keys: Keys
) -> None:
    """The readers tell a log that went back by the ids of its events, so the engine names
    each event it appends by an id of its own: the same moves played again at the versions
    a failover took back are events of other ids (not ids made of game and version)."""
    commands, _ = play_locally(GAME, 3, seed=20, limit=10)
    sender = CommandSender(redis, keys)
    store = EventStore(redis, keys)
    async with running_engine(redis, keys):
        cut = await _played(sender, commands[:6])
        await _played(sender, commands[6:])
    lost = await store.read(GAME)
    await _roll_back(redis, keys, cut)
    again = [c.model_copy(update={"command_id": new_id()}) for c in commands[6:]]
    async with running_engine(redis, keys):  # a new engine: nothing cached of the lost log
        await _played(sender, again)
    kept = await store.read(GAME)
    assert [(e.version, e.type, e.data) for e in kept] == [
        (e.version, e.type, e.data) for e in lost
    ]
    assert kept[:cut] == lost[:cut]
    assert all(k.event_id != g.event_id for k, g in zip(kept[cut:], lost[cut:], strict=True))


async def test_an_engine_holding_a_game_whose_log_went_back_reloads_it(
    redis: Redis, keys: Keys
) -> None:
    """The engine holds a game at a version a failover took back, and the commands of the
    lost tail come again (the rolled-back command stream delivers them again): decided on
    the cached state they would be duplicates, or moves refused; the log is behind the
    version they were decided at, so nothing is recorded, the game is reloaded and they are
    applied again, as the same moves."""
    commands, _ = play_locally(GAME, 3, seed=21, limit=10)
    sender = CommandSender(redis, keys)
    store = EventStore(redis, keys)
    async with running_engine(redis, keys) as engine:
        cut = await _played(sender, commands[:6])
        await _played(sender, commands[6:])
        lost = await store.read(GAME)
        assert engine.games[GAME].version == lost[-1].version  # held
        await _roll_back(redis, keys, cut)
        await redis.delete(*[keys.result(GAME, c.seat, c.command_id) for c in commands[6:]])
        await _played(sender, commands[6:])
    kept = await store.read(GAME)
    assert [(e.version, e.type, e.data) for e in kept] == [
        (e.version, e.type, e.data) for e in lost
    ]


async def _played(sender: CommandSender, commands: list[CommandEnvelope]) -> int:
    """Send ``commands`` and wait for the last one's answer: the game's version then."""
    await sender.send_many(commands)
    result = await sender.result(
        GAME, commands[-1].command_id, timeout_s=30, seat=commands[-1].seat
    )
    assert result is not None and result.status == "accepted", result
    return result.version


async def _assert_as_rebuilt(redis: Redis, keys: Keys, database: Engine) -> None:
    """The scoring rows equal those of a scoring that only ever saw the logs as they are."""
    live = dump(database)
    await ScoringService(redis, keys, database).rebuild()
    rebuilt = dump(database)
    for table in TABLES:
        if table.name != "projection_checkpoints":
            assert live[table.name] == rebuilt[table.name], table.name


def _a_game(seed: int, game: str = GAME) -> tuple[aod.GameState, list[EventEnvelope]]:
    """A new game of 3 seats and its setup events."""
    state, created = aod.new_game(RULES, None, 3, seed)
    return state, [stored(game, e, i) for i, e in enumerate(created, 1)]


def _scored(database: Engine) -> dict[str, Any]:
    """Each scored game's row, by game id."""
    table = table_of(ScoredGame)
    with database.connect() as conn:
        return {row.game_id: row for row in conn.execute(select(table))}


async def _score_until(
    scorer: ScoringService, database: Engine, versions: dict[str, tuple[int, str]]
) -> None:
    """Wait until ``scorer`` has read every stream and scored each game up to (version,
    status)."""

    async def done() -> bool:
        rows = _scored(database)
        scored = {g: (r.version, r.status) for g, r in rows.items() if g in versions}
        return await scorer.caught_up() and scored == versions

    await wait_for(done)


@pytest.mark.every_database
@pytest.mark.parametrize("longer", [False, True], ids=["log-shorter", "log-longer"])
async def test_scoring_started_again_scores_again_a_game_whose_log_went_back_while_down(
    redis: Redis, keys: Keys, database: Engine, longer: bool
) -> None:
    """Scoring holds nothing in memory after a restart: the game's row in SQL names the
    event it applied last, and a log that no longer has it (shorter now, or another event
    at that version) is scored again from its start, not read on from the row's version."""
    store = EventStore(redis, keys)
    state, setup = _a_game(13)
    common = commands_events(state, len(setup), seed=1, count=4)
    cut = common[-1][-1].version
    branch = state.copy()
    lost = commands_events(state, cut, seed=2, count=6)
    kept = commands_events(branch, cut, seed=3, count=16 if longer else 2)
    assert (kept[-1][-1].version > lost[-1][-1].version) == longer
    await _append(store, [setup, *common, *lost])
    scorer = ScoringService(redis, keys, database, batch_size=5)
    await scorer.start()
    try:
        await _score_until(scorer, database, {GAME: (lost[-1][-1].version, "running")})
    finally:
        await scorer.close()
    assert _scored(database)[GAME].event_id == lost[-1][-1].event_id

    await _roll_back(redis, keys, cut)
    await _append(store, kept)
    again = ScoringService(redis, keys, database, batch_size=5)
    await again.start()
    try:
        await _score_until(again, database, {GAME: (kept[-1][-1].version, "running")})
    finally:
        await again.close()
    assert _scored(database)[GAME].event_id == kept[-1][-1].event_id
    with database.connect() as conn:
        decisions = conn.execute(select(table_of(Decision).c.version)).all()
    assert len(decisions) == len(common) + len(kept)  # none of the lost branch's left
    await _assert_as_rebuilt(redis, keys, database)


@pytest.mark.every_database
@pytest.mark.parametrize("ends_again", [False, True], ids=["goes-on", "ends-again"])
async def test_scoring_withdraws_a_finished_game_whose_end_the_log_lost(
    redis: Redis, keys: Keys, database: Engine, ends_again: bool
) -> None:
    """A finished game leaves scoring's memory; a failover then takes its end back and the
    game goes on: not to its end yet, or (read in one batch by a scoring started again) to
    another end. Its row names its last event, which the log no longer has: the game is
    scored again, its lost end's results and ratings undone (the same players' earlier game
    stays rated, and is their last game again unless the game ends again)."""
    store = EventStore(redis, keys)
    earlier_state, earlier = _a_game(14, "g-earlier")
    earlier_log = commands_events(earlier_state, len(earlier), seed=5, count=None, game="g-earlier")
    state, setup = _a_game(15)
    total = len(commands_events(state.copy(), len(setup), seed=6, count=None))
    common = commands_events(state, len(setup), seed=6, count=total - 10)
    cut = common[-1][-1].version
    branch = state.copy()
    lost = commands_events(state, cut, seed=7, count=None)  # to the end
    kept = commands_events(branch, cut, seed=8, count=None if ends_again else 2)
    assert not aod.pending(state) and bool(aod.pending(branch)) != ends_again
    await _append(store, [earlier, *earlier_log, setup, *common, *lost])
    scorer = ScoringService(redis, keys, database, batch_size=500)
    await scorer.start()
    try:
        ended = {"g-earlier": (earlier_log[-1][-1].version, "finished")}
        await _score_until(scorer, database, {**ended, GAME: (lost[-1][-1].version, "finished")})
        await wait_for(lambda: _forgotten(scorer, GAME))  # finished: nothing held in memory
        assert {g for g, *_ in _rows(database, RatingChange, "game_id")} == {"g-earlier", GAME}
        if ends_again:  # withdrawn and finished again in one batch
            await scorer.close()
        await _roll_back(redis, keys, cut)
        await _append(store, kept)
        if ends_again:
            scorer = ScoringService(redis, keys, database, batch_size=500)
            await scorer.start()
        status = "finished" if ends_again else "running"
        await _score_until(scorer, database, {**ended, GAME: (kept[-1][-1].version, status)})
    finally:
        await scorer.close()
    results = _rows(database, Result, "total", game_id=GAME)
    assert sorted(results) == (
        sorted((r["total"],) for r in aod.score(branch)) if ends_again else []
    )
    rated = {g for g, *_ in _rows(database, RatingChange, "game_id")}
    assert rated == ({"g-earlier", GAME} if ends_again else {"g-earlier"})
    ratings = _rows(database, Rating, "games", "last_game")
    assert ratings and set(ratings) == ({(2, GAME)} if ends_again else {(1, "g-earlier")})
    await _assert_as_rebuilt(redis, keys, database)


async def _forgotten(scorer: ScoringService, game_id: str) -> bool:
    return game_id not in scorer.games


def _rows(database: Engine, model: Any, *columns: str, game_id: str | None = None) -> list[Any]:
    """Some columns of a scoring table's rows (of one game, if given)."""
    table = table_of(model)
    query = select(*(table.c[c] for c in columns))
    if game_id is not None:
        query = query.where(table.c.game_id == game_id)
    with database.connect() as conn:
        return [tuple(row) for row in conn.execute(query)]


async def test_a_socket_following_a_game_whose_log_went_back_is_closed_to_read_it_again(
    any_redis: Redis, keys: Keys
) -> None:
    """The WebSocket's stream of a game (the lobby's fan-out, live) meets an event at a
    version it has sent that is another event: it stops (the socket closes with 1012 for
    its client to read the game again) instead of skipping the version as a duplicate."""
    store = EventStore(any_redis, keys)
    state, created = aod.new_game(RULES, None, 3, 12)
    setup = [stored(GAME, e, i) for i, e in enumerate(created, 1)]
    lost = commands_events(state.copy(), len(setup), seed=4, count=6)
    kept = commands_events(state, len(setup), seed=5, count=2)
    await _append(store, [setup])
    fanout = EventFanout(any_redis, keys, block_ms=50)
    lobby = SimpleNamespace(fanout=fanout, store=store)
    sent: list[dict[str, Any]] = []

    async def send(text: str) -> None:
        sent.append(json.loads(text))

    streaming = asyncio.create_task(stream_events(lobby, GAME, None, 0, send))  # type: ignore[arg-type]
    try:
        await wait_for(lambda: _sent_up_to(sent, len(setup)))
        await _append(store, lost)
        last_public = max(e.version for b in lost for e in b if e.visibility == "public")
        await wait_for(lambda: _sent_up_to(sent, last_public))
        assert not streaming.done()
        await _roll_back(any_redis, keys, len(setup))
        await _append(store, kept)
        with pytest.raises(LogWentBack):
            await asyncio.wait_for(streaming, 10)
    finally:
        streaming.cancel()
        await asyncio.gather(streaming, return_exceptions=True)
        await fanout.close()


async def test_a_socket_resumed_from_an_event_the_log_lost_is_closed_to_read_the_game_again(
    redis: Redis, keys: Keys
) -> None:
    """A client resumes with the last version it got and that event's id (``event``): a
    log that no longer has that event there, shorter now or with another event at that
    version, closes the socket (1012) instead of streaming on from another log."""
    store = EventStore(redis, keys)
    state, setup = _a_game(17)
    branch = state.copy()
    lost = commands_events(state, len(setup), seed=11, count=3)
    kept = commands_events(branch, len(setup), seed=12, count=12)
    await _append(store, [setup, *lost])
    lobby: Any = SimpleNamespace(store=store, redis=redis, keys=keys)
    got = lost[-1][-1]
    assert (await _start(lobby, GAME, None, str(got.version), got.event_id)).after == got.version
    await _roll_back(redis, keys, len(setup))
    with pytest.raises(LogWentBack):  # shorter
        await _start(lobby, GAME, None, str(got.version), got.event_id)
    await _append(store, kept)
    assert kept[-1][-1].version > got.version
    with pytest.raises(LogWentBack):  # another event at that version
        await _start(lobby, GAME, None, str(got.version), got.event_id)
    again = await _start(lobby, GAME, None, "0", None)  # the client reads the game again
    assert again.after == 0 and not again.over


async def _sent_up_to(sent: list[dict[str, Any]], version: int) -> bool:
    return bool(sent) and sent[-1]["version"] >= version
