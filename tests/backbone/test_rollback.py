"""A log that went back: a failover loses the tail of a game's log that the old master had
acknowledged, and the engine writes other events at the same versions. The views projection,
scoring and the WebSocket stream notice (the event they hold is no longer in the log): the
first two project the game again from the log, the stream stops for its client to read the
game again, instead of diverging from the log for good.

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
from services.lobby.games import LogWentBack, stream_events
from services.scoring.db import TABLES, Decision, Standing, table_of
from services.scoring.service import ScoringService
from shared.bus import Keys
from shared.contracts import EventEnvelope
from shared.eventstore import Append, EventStore
from shared.games import age_of_discovery as aod
from shared.views import read_view

from ..scoring.helpers import dump
from .helpers import RULES, running_projector, stored, wait_for

GAME = "g-rollback"


def commands_events(
    state: aod.GameState, version: int, seed: int, count: int
) -> list[list[EventEnvelope]]:
    """``count`` random legal commands from ``state`` (advanced past them), as the events
    each appends after ``version``."""
    chooser = random.Random(seed)
    out = []
    for _ in range(count):
        seat = chooser.choice(aod.pending(state)).seat
        command = chooser.choice(aod.legal_commands(state, seat))
        cause = uuid.uuid4().hex
        events = []
        for event in aod.decide_into(state, command):
            version += 1
            events.append(stored(GAME, event, version, actor="player", cause=cause))
        out.append(events)
    return out


async def _append(store: EventStore, batches: list[list[EventEnvelope]]) -> None:
    for events in batches:
        expected = events[0].version - 1
        result = await store.append(Append(GAME, expected, [e.encode() for e in events]))
        assert result.status == "ok", result


async def _roll_back(redis: Redis, keys: Keys, to_version: int) -> int:
    """Delete the log's entries above ``to_version`` and set the game's version back, as a
    replica that lacked them and took over would hold them."""
    tail = await redis.xrange(keys.log(GAME), min=f"{to_version + 1}-0")
    await redis.xdel(keys.log(GAME), *[entry_id for entry_id, _ in tail])
    await redis.execute_command("XSETID", keys.log(GAME), f"{to_version}-0")  # never written
    await redis.hset(keys.meta(GAME), "version", to_version)
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
                assert await read_view(any_redis, keys, GAME, seat) == (
                    aod.view(branch, None) if seat is None else aod.seat_view(branch, seat)
                )
    finally:
        await scorer.close()

    live = dump(database)
    with database.connect() as conn:
        decisions = conn.execute(select(table_of(Decision).c.version)).all()
        standings = conn.execute(select(table_of(Standing)).order_by("seat")).all()
    assert len(decisions) == len(common) + len(kept)  # none of the lost branch's left
    assert [row.total for row in standings] == [r["total"] for r in aod.score(branch)]
    assert {row.version for row in standings} == {kept[-1][-1].version}
    # The rows equal those of a scoring that only ever saw the log as it is now.
    await ScoringService(any_redis, keys, database).rebuild()
    rebuilt = dump(database)
    for table in TABLES:
        if table.name != "projection_checkpoints":
            assert live[table.name] == rebuilt[table.name], table.name


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


async def _sent_up_to(sent: list[dict[str, Any]], version: int) -> bool:
    return bool(sent) and sent[-1]["version"] >= version
