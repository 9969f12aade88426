"""Redis clients for every service: asyncio, with commands packed by hiredis.

redis-py's asyncio connections pack commands in pure Python, which costs the engine more
than its rules do (an append carries a couple of dozen arguments). The synchronous client
already packs with hiredis; these connection classes do the same for asyncio.
"""

from __future__ import annotations

from typing import Any

import hiredis
from redis.asyncio import Redis
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


def connect(url: str, **options: Any) -> Redis:
    """An asyncio client for ``url`` (``redis://``, ``rediss://`` or ``unix://``)."""
    client = Redis.from_url(url, **options)
    pool = client.connection_pool
    if pool.connection_class is UnixDomainSocketConnection:
        pool.connection_class = HiredisUnixConnection
    elif pool.connection_class is Connection:
        pool.connection_class = HiredisConnection
    return client
