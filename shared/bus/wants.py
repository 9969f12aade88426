"""The streams of wanted views (``Keys.view_wants``, one per partition: the wanted game's):
readers of views name the games they read, and the views projection projects those games
only (``services.lobby.views``). A want is a :class:`~shared.contracts.ViewWant` published
through FastStream (its JSON in the entry's body field); the entry's id is its Redis time:
the projection keeps a game wanted for ``keep_s`` seconds from it.

Trimming: FastStream's publish trims by length only (``maxlen``), not by age (``MINID``).
The stream keeps no want older than the longest want (:data:`KEPT_S`): the projection
trims it so (:func:`trim_wants`) once a minute, from the loop where it forgets the wants
that ran out; the publish's ``maxlen`` (:data:`KEPT`) only bounds the stream while no
projection runs."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import structlog
from redis.asyncio import Redis

from shared.contracts import ViewWant

from .consumer import Broker
from .faststream_ext import BODY
from .faults import transient
from .tails import newest_ids

log = structlog.get_logger("caravel.bus")

KEPT_S = 600.0  # the longest a want lasts: entries older than this are trimmed
KEPT = 100_000  # entries kept at most: 166 wants a second for KEPT_S (one per read, at most)
READ = 1_000


async def want(broker: Broker, pipe: Any, stream: str, game_id: str, keep_s: float) -> None:
    """Queue on ``pipe`` (a pipeline of ``broker``'s client) the want of ``game_id``'s views
    for ``keep_s`` seconds (0: project it once)."""
    body = ViewWant(game_id=game_id, keep_s=keep_s).encode()
    await broker.publish_in(pipe, body, stream, maxlen=KEPT)


async def trim_wants(redis: Redis, stream: str) -> bool:
    """Drop the wants older than :data:`KEPT_S` (none of them lasts any more): exactly, as
    it runs once a minute only (an approximate trim keeps whole nodes of 100 entries).

    A trim can wait: when the stream's shard refuses writes for a while (a master short of
    replicas answers NOREPLICAS), it is left to the next minute and ``False`` returned. It
    used to raise, and the views projection, which trims first thing at its start, died
    there: no game of any partition got a view again (a 1-in-3 chance, on a 3-shard
    cluster, that the stream lay on the shard at fault)."""
    try:
        await redis.xtrim(stream, minid=_oldest(), approximate=False)
    except Exception as error:
        if not transient(error):
            raise
        log.warning("wanted views not trimmed, for now", stream=stream, error=str(error))
        return False
    return True


def wanted_until(entry_id: str, fields: dict[bytes, bytes]) -> tuple[str, float]:
    """A want's game and until when (a Unix time) it is wanted."""
    wanted = ViewWant.decode(fields[BODY])
    return wanted.game_id, int(entry_id.partition("-")[0]) / 1000 + wanted.keep_s


async def recent_wants(redis: Redis, stream: str) -> tuple[str, list[tuple[str, float]]]:
    """The stream's tail and the wants before it that may still last (those of the last
    :data:`KEPT_S`): what a projection starting now must honour; it follows the stream
    from the tail on."""
    tail = (await newest_ids(redis, [stream]))[stream]
    start = _oldest()
    found: list[tuple[str, float]] = []
    while True:
        entries: Any = await redis.xrange(stream, start, tail, count=READ)
        found.extend(_parsed(entries))
        if len(entries) < READ:
            return tail, found
        start = "(" + entries[-1][0].decode()


def _oldest() -> str:
    """The id of the oldest want that may still last."""
    return f"{int((time.time() - KEPT_S) * 1000)}-0"


def _parsed(entries: Any) -> Iterator[tuple[str, float]]:
    for entry_id, fields in entries:
        yield wanted_until(entry_id.decode(), fields)
