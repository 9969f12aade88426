"""Each service of a process has its own Redis pool: one that uses up its connections (the
lobby's, under a flood of sockets) neither takes the others' nor fails its own commands."""

from __future__ import annotations

import asyncio
import uuid

from redis.asyncio import Redis

from services.runtime import RedisPools
from shared.bus import Keys


async def test_a_service_with_every_connection_busy_waits_and_the_others_go_on(
    redis: Redis, redis_url: str, keys: Keys
) -> None:
    pools = RedisPools(redis_url, max_connections=1)
    lobby, engine = pools.client(), pools.client()
    stream = f"{keys.prefix}:{uuid.uuid4().hex}"
    try:

        async def hold() -> None:  # the lobby's one connection, blocked for a while
            await lobby.xread({stream: "$"}, block=300)

        busy = asyncio.create_task(hold())
        await asyncio.sleep(0.05)
        other = await engine.ping()  # another service's pool: not held up
        queued = await lobby.ping()  # waits for the connection instead of failing
        await busy
    finally:
        await pools.aclose()
    assert lobby.connection_pool is not engine.connection_pool
    assert other is True and queued is True
