"""The stream of wanted views (``Keys.view_wants``): readers of views name the games they
read, and the views projection projects those games only (``services.lobby.views``). An
entry's id is its Redis time: the projection keeps a game wanted for ``k`` seconds from it,
and the stream keeps no entry older than the longest want (:data:`KEPT_S`)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

from redis.asyncio import Redis
from redis.asyncio.client import Pipeline

from .tails import newest_ids

KEPT_S = 600.0  # the longest a want lasts: entries older than this are trimmed
READ = 1_000


def want(pipe: Pipeline | Redis, stream: str, game_id: str, keep_s: float) -> Any:
    """Queue (on a pipeline) or send the want of ``game_id``'s views for ``keep_s`` seconds
    (0: project it once), trimming the wants older than :data:`KEPT_S`."""
    oldest = f"{int((time.time() - KEPT_S) * 1000)}-0"
    fields = {"g": game_id, "k": f"{keep_s:g}"}
    return pipe.xadd(stream, fields, minid=oldest, approximate=True)  # type: ignore[arg-type]


def wanted_until(entry_id: str, fields: dict[bytes, bytes]) -> tuple[str, float]:
    """A want's game and until when (a Unix time) it is wanted."""
    return fields[b"g"].decode(), int(entry_id.partition("-")[0]) / 1000 + float(fields[b"k"])


async def recent_wants(redis: Redis, stream: str) -> tuple[str, list[tuple[str, float]]]:
    """The stream's tail and the wants before it that may still last (those of the last
    :data:`KEPT_S`): what a projection starting now must honour; it follows the stream
    from the tail on."""
    tail = (await newest_ids(redis, [stream]))[stream]
    start = f"{int((time.time() - KEPT_S) * 1000)}-0"
    found: list[tuple[str, float]] = []
    while True:
        entries: Any = await redis.xrange(stream, start, tail, count=READ)
        found.extend(_parsed(entries))
        if len(entries) < READ:
            return tail, found
        start = "(" + entries[-1][0].decode()


def _parsed(entries: Any) -> Iterator[tuple[str, float]]:
    for entry_id, fields in entries:
        yield wanted_until(entry_id.decode(), fields)
