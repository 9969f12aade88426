"""The streams of wanted views (``Keys.view_wants``, one per partition): readers of views
name the games they read, each on its game's partition's stream, and the views projection
projects those games only (``services.lobby.views``). A want is a
:class:`~shared.contracts.ViewWant` published through FastStream (its JSON in the entry's
body field); the entry's id is its Redis time: the projection keeps a game wanted for
``keep_s`` seconds from it.

Per partition since issue 25: one stream for all partitions lay on one shard, and while that
shard was away no game of any shard was projected. The old stream (``<prefix>:viewwants``)
is neither read nor written: a want is a hint that lasts :data:`KEPT_S` at most, and every
reader asks again (every :data:`~shared.views.ASK_AGAIN_S`, at its first read in a process,
and whenever a read finds no view), so after an upgrade each game read is asked for on the
new streams within minutes, most at once. What is left in the old key (at most
:data:`KEPT` entries) can be deleted by hand.

Trimming: FastStream's publish trims by length only (``maxlen``), not by age (``MINID``).
A stream keeps no want older than the longest want (:data:`KEPT_S`): the projection
trims each so (:func:`trim_wants`) once a minute, from its tidying loop; the publish's
``maxlen`` (:data:`KEPT`) only bounds a stream while no projection runs."""

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
from .keys import Keys
from .tails import newest_ids

log = structlog.get_logger("caravel.bus")

KEPT_S = 600.0  # the longest a want lasts: entries older than this are trimmed
KEPT = 100_000  # entries kept at most: 166 wants a second for KEPT_S (one per read, at most)
READ = 1_000


async def want(broker: Broker, pipe: Any, keys: Keys, game_id: str, keep_s: float) -> None:
    """Queue on ``pipe`` (a pipeline of ``broker``'s client) the want of ``game_id``'s views
    for ``keep_s`` seconds (0: project it once), on its partition's stream."""
    body = ViewWant(game_id=game_id, keep_s=keep_s).encode()
    stream = keys.view_wants(keys.partition(game_id))
    await broker.publish_in(pipe, body, stream, maxlen=KEPT)


async def trim_wants(redis: Redis, stream: str) -> bool:
    """Drop the wants older than :data:`KEPT_S` (none of them lasts any more): exactly, as
    it runs once a minute only (an approximate trim keeps whole nodes of 100 entries).

    A trim can wait: when the stream's shard refuses writes for a while (a master short of
    replicas answers NOREPLICAS), it is left to the next minute and ``False`` returned. It
    used to raise, and the views projection, which trimmed first thing at its start, died
    there: no game of any partition got a view again."""
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
