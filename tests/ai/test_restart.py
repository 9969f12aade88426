"""A bot player started while Redis is away plays once Redis is back (issue 25)."""

from __future__ import annotations

import asyncio
import gc
import signal

from services.ai.service import BotPlayer
from shared.bus import CommandSender, Keys, connect

from ..backbone.helpers import (
    create_game,
    running_engine,
    running_projector,
    settings_for,
    wait_for_actor,
)
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
            await wait_for_actor(redis, keys, "g-away", "bot", timeout_s=60)
        assert not playing.done()
    finally:
        async with server:  # stopped last
            stop.set()
            await asyncio.wait_for(playing, 30)
            await redis.aclose()


async def test_a_bot_player_whose_redis_stops_answering_mid_start_plays_once_it_answers(
    keys: Keys,
) -> None:
    """A Redis that stops answering (here a ``redis-server`` stopped with SIGSTOP: it still
    accepts connections) just as the start follows the seat changes: the follow's first
    read is not answered in 3 s, the start is taken back (its subscriber stopped) and tried
    again. The next attempt's ``broker.start()`` started that stopped subscriber again
    (FastStream's start starts every subscriber the broker still holds: a weak set, where
    a stopped one lingers until a cyclic collection, rare in a serving process,
    ``tune_collector``), whose first read timed out as the built-in ``TimeoutError``, which
    the start does not wait out: the bot player's task ended, and its process with it. Here
    the task lives on while Redis is stopped, and once it answers the player plays."""
    async with OwnRedis() as server:
        await server.start()
        assert server.process is not None
        redis = connect(server.url)
        stop = asyncio.Event()
        player = BotPlayer(redis, keys, settings_for(keys, bot_think_ms=0))
        gc.disable()  # as a serving process: nothing collects the stopped subscriber
        playing = asyncio.create_task(player.run(stop))
        try:
            while not player.broker.subscribers and not playing.done():
                await asyncio.sleep(0)  # the seat changes' subscriber, made: its read next
            server.process.send_signal(signal.SIGSTOP)
            # The follow times out after 3 s; the next attempt comes 0.05 s later.
            await asyncio.wait([playing], timeout=8)
            assert not playing.done(), f"the bot player's task ended: {playing.exception()!r}"
            server.process.send_signal(signal.SIGCONT)
            await _seat(redis, keys, "g-stopped", ("random", "random"))
            async with running_engine(redis, keys), running_projector(redis, keys):
                result = await CommandSender(redis, keys).execute(create_game("g-stopped", 2))
                assert result.status == "accepted"
                await wait_for_actor(redis, keys, "g-stopped", "bot", timeout_s=60)
            assert not playing.done()
        finally:
            gc.enable()
            server.process.send_signal(signal.SIGCONT)
            stop.set()
            await asyncio.gather(playing, return_exceptions=True)
            await redis.aclose()
