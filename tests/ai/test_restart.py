"""A bot player started while Redis is away plays once Redis is back (issue 25)."""

from __future__ import annotations

import asyncio

from services.ai.service import BotPlayer
from shared.bus import CommandSender, Keys, connect
from shared.eventstore import EventStore

from ..backbone.helpers import create_game, running_engine, running_projector, settings_for
from ..backbone.helpers import wait_for as wait_until
from ..cluster import OwnRedis
from .test_service import _seat


async def test_a_bot_player_started_while_redis_is_away_plays_once_it_is_back(keys: Keys) -> None:
    """Its start (the broker's, the seat changes' follow, each partition's subscriber) is
    waited for as a whole: started against a port nothing answers on, then a Redis comes up
    there, its task still runs and it answers a bot seat's requests (the game moves, every
    move the bots')."""
    server = OwnRedis()
    redis = connect(server.url)
    stop = asyncio.Event()
    playing = asyncio.create_task(
        BotPlayer(redis, keys, settings_for(keys, bot_think_ms=0)).run(stop)
    )
    try:
        await asyncio.sleep(1)  # a few failed starts
        assert not playing.done(), "the bot player's task ended while Redis was away"
        await server.start()
        await _seat(redis, keys, "g-away", ("random", "random"))
        async with running_engine(redis, keys), running_projector(redis, keys):
            result = await CommandSender(redis, keys).execute(create_game("g-away", players=2))
            assert result.status == "accepted"

            async def moved() -> bool:
                events = await EventStore(redis, keys).read("g-away")
                return any(e.actor == "bot" for e in events)

            await wait_until(moved, timeout_s=60, every_s=0.1)
        assert not playing.done()
    finally:
        async with server:  # stopped last
            stop.set()
            await asyncio.wait_for(playing, 30)
            await redis.aclose()
