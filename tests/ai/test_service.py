"""The bot player on the real bus: it answers decision requests, within their deadlines."""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from redis.asyncio import Redis

from services.ai.service import BotPlayer
from services.lobby.views import ViewProjector
from shared.bus import CommandSender, GroupReader, Keys, ensure_group
from shared.contracts import CommandEnvelope, DecisionRequest
from shared.eventstore import EventStore

from ..backbone.helpers import create_game, running_engine, settings_for, wait_for


@asynccontextmanager
async def bots_serving(redis: Redis, keys: Keys, think_ms: int) -> AsyncIterator[None]:
    """The engine, the views projection and one bot player, in this process."""
    stop = asyncio.Event()
    projector = ViewProjector(redis, keys)
    player = BotPlayer(redis, keys, settings_for(keys, bot_think_ms=think_ms))
    async with running_engine(redis, keys):
        tasks = [asyncio.create_task(projector.run(stop)), asyncio.create_task(player.run(stop))]
        try:
            yield
        finally:
            stop.set()
            await asyncio.gather(*tasks)


async def _seat_bots(redis: Redis, keys: Keys, game_id: str, deadline_s: float) -> None:
    mapping = {"0": "bot:mcts", "1": "bot:random", "deadline_s": str(deadline_s)}
    await redis.hset(keys.seats(game_id), mapping=mapping)  # type: ignore[misc]


async def test_a_bot_game_runs_to_its_end_through_the_engine(redis: Redis, keys: Keys) -> None:
    """Two bot seats (mcts and random) with a short move deadline: the bot player answers
    every decision request from the bus and the game reaches its end, every move the bots'."""
    await _seat_bots(redis, keys, "g-bots", deadline_s=0.15)
    async with bots_serving(redis, keys, think_ms=1000):
        result = await CommandSender(redis, keys).execute(create_game("g-bots", players=2))
        assert result.status == "accepted"

        async def over() -> bool:
            events = await EventStore(redis, keys).read("g-bots")
            return events[-1].type == "game_ended"

        await wait_for(over, timeout_s=240, every_s=0.2)
    events = await EventStore(redis, keys).read("g-bots")
    assert {e.actor for e in events} == {"system", "bot"}
    assert {e.data["seat"] for e in events if e.type == "unit_placed"} == {0, 1}


async def test_a_deadline_shorter_than_the_budget_is_still_met(redis: Redis, keys: Keys) -> None:
    """The mcts seat may think 5 s, but each move is due 0.3 s after its request: every
    answer reaches the command stream before its request's deadline (the stream entry id is
    the Redis server's clock, in ms)."""
    await _seat_bots(redis, keys, "g-due", deadline_s=0.3)
    partition = keys.partition("g-due")
    async with bots_serving(redis, keys, think_ms=5000):
        await CommandSender(redis, keys).execute(create_game("g-due", players=2))

        async def answered() -> list[tuple[DecisionRequest, float]]:
            commands = await redis.xrange(keys.commands(partition))
            sent = {}
            for entry_id, fields in commands:
                command = CommandEnvelope.model_validate_json(fields[b"c"])
                sent[command.command_id] = int(entry_id.split(b"-")[0]) / 1000
            out = []
            for _, fields in await redis.xrange(keys.decisions(partition)):
                request = DecisionRequest.model_validate_json(fields[b"r"])
                key = f"{request.game_id}:{request.version}:{request.seat}".encode()
                command_id = hashlib.sha1(key).hexdigest()
                if request.seat == 0 and command_id in sent:
                    out.append((request, sent[command_id]))
            return out

        async def five_answered() -> bool:
            return len(await answered()) >= 5

        await wait_for(five_answered, timeout_s=60, every_s=0.1)
        for request, at in await answered():
            assert at < request.deadline.timestamp(), (request.version, at, request.deadline)


async def test_a_request_a_dead_worker_left_pending_is_answered_by_a_live_one(
    redis: Redis, keys: Keys
) -> None:
    """A worker read the first decision request and died without answering: a live bot
    player reclaims it once it has been idle for CARAVEL_CLAIM_IDLE_MS, and the game moves."""
    await redis.hset(keys.seats("g-orphan"), mapping={"0": "bot:random", "1": "bot:random"})  # type: ignore[misc]
    stream = keys.decisions(keys.partition("g-orphan"))
    stop = asyncio.Event()
    projector = ViewProjector(redis, keys)
    async with running_engine(redis, keys):
        projecting = asyncio.create_task(projector.run(stop))
        result = await CommandSender(redis, keys).execute(create_game("g-orphan", players=2))
        await ensure_group(redis, stream, "ai")
        dead = GroupReader(redis, "ai", "dead-worker", keys.dead_letters())
        [orphan] = await dead.read([stream], 10, None)  # read, never answered
        request = DecisionRequest.model_validate_json(orphan.fields[b"r"])
        assert request.version == result.version
        player = BotPlayer(redis, keys, settings_for(keys, claim_idle_ms=200))
        playing = asyncio.create_task(player.run(stop))

        async def moved() -> bool:
            return len(await EventStore(redis, keys).read("g-orphan")) > request.version

        await wait_for(moved)
        stop.set()
        await asyncio.gather(projecting, playing)
    answer = (await EventStore(redis, keys).read("g-orphan"))[request.version]
    expected = hashlib.sha1(f"g-orphan:{request.version}:{request.seat}".encode()).hexdigest()
    assert (answer.actor, answer.causation_id) == ("bot", expected)
    assert not await redis.xpending_range(stream, "ai", "-", "+", 10)  # answered, acknowledged
