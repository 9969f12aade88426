"""Redis clients for every service: asyncio, with commands packed by hiredis.

redis-py's asyncio connections pack commands in pure Python, which costs the engine more
than its rules do (an append carries a couple of dozen arguments). The synchronous client
already packs with hiredis; these connection classes do the same for asyncio.
"""

from __future__ import annotations

from typing import Any

import hiredis
from redis.asyncio import BlockingConnectionPool, Redis
from redis.asyncio.connection import Connection, UnixDomainSocketConnection
from redis.exceptions import DataError


def _pack(args: tuple[Any, ...]) -> list[bytes]:
    if isinstance(args[0], str):
        args = tuple(args[0].encode().split()) + args[1:]
    elif b" " in args[0]:
        args = tuple(args[0].split()) + args[1:]
    try:
        return [hiredis.pack_command(args)]
    except TypeError as e:
        raise DataError(str(e)) from None


class HiredisConnection(Connection):
    def pack_command(self, *args: Any) -> list[bytes]:
        return _pack(args)


class HiredisUnixConnection(UnixDomainSocketConnection):
    def pack_command(self, *args: Any) -> list[bytes]:
        return _pack(args)


def connect(url: str, wait_s: float | None = None, **options: Any) -> Redis:
    """An asyncio client for ``url`` (``redis://``, ``rediss://`` or ``unix://``). With
    ``wait_s``, a command finding every connection of the pool in use waits that long for
    one (then ``ConnectionError``) instead of failing at once: a burst queues, not fails."""
    if wait_s is None:
        client = Redis.from_url(url, **options)
    else:
        client = Redis.from_pool(BlockingConnectionPool.from_url(url, timeout=wait_s, **options))
    pool = client.connection_pool
    if pool.connection_class is UnixDomainSocketConnection:
        pool.connection_class = HiredisUnixConnection
    elif pool.connection_class is Connection:
        pool.connection_class = HiredisConnection
    return client
