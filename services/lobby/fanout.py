"""One reader of the partition event and decision streams per lobby process, fanning
entries out to the WebSockets that follow each game: the events' notifications, and the
decision requests the engine adds with them (a seat's socket tells it its turn).

A blocking XREAD per WebSocket would hold a Redis connection per open socket and read
every other game's entries once per socket; the fan-out reads each stream once, through
one :class:`~shared.bus.Follower` (no consumer group: every lobby process reads what its
own sockets follow). It follows a partition's event and decision streams only while a
socket of this process listens to one of its games, so lobby processes beside each other
do not each read every partition; and it parses an entry only for a game with a listener,
once for all of that game's sockets, each event's frame encoded once (:class:`Published`).

No gap: a listener is registered, and the positions of its partition's streams are fixed,
before :meth:`EventFanout.listen` returns; so an entry is either already in the game's log
when the listener reads it, or is delivered to the listener's queue afterwards (or both:
listeners skip versions they have already sent).
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import NamedTuple

from redis.asyncio import Redis

from shared.bus import Broker, Delivery, Follower, Keys, newest_ids
from shared.contracts import (
    DecisionHead,
    Notification,
    decision_head,
    dump_json,
    load_json,
)
from shared.games import api

BATCH = 500


class SentEvent(NamedTuple):
    """One event of a notification, ready for any socket: who may see it, and its frame."""

    version: int
    event_id: str | None
    ended: bool  # the game's last event
    visibility: str | int  # ``public`` or the one seat that sees it
    frame: str  # its public JSON, the text a socket that may see it is sent

    def visible_to(self, seat: int | None) -> bool:
        """As :meth:`shared.games.api.Event.visible_to`."""
        return self.visibility == api.PUBLIC or (seat is not None and self.visibility == seat)


class Published(NamedTuple):
    """A notification's events, parsed and encoded once for every socket of its game."""

    game_id: str
    version: int
    events: list[SentEvent]

    @classmethod
    def of(cls, notification: Notification) -> Published:
        events = [
            SentEvent(
                raw["version"],
                raw.get("event_id"),
                raw["type"] == api.GAME_ENDED,
                raw.get("visibility", api.PUBLIC),
                dump_json(raw),
            )
            for raw in notification.events()
        ]
        return cls(notification.game_id, notification.version, events)


class Decision:
    """A decision request as its writer encoded it (the engine), read only as far as whom
    it is for (:func:`~shared.contracts.decision_head`), with its ``decision`` frames made
    once: the seat's is the request's own JSON with the frame's type put in front (the
    server wrote it: neither validated nor encoded again), a spectator's has no legal
    commands."""

    __slots__ = ("_frames", "head", "raw")

    def __init__(self, raw: bytes, head: DecisionHead | None = None) -> None:
        self.raw = raw
        self.head = decision_head(raw) if head is None else head
        self._frames: dict[bool, str] = {}

    def frame(self, spectator: bool) -> str:
        """The frame a socket is sent: a spectator's has no legal commands."""
        made = self._frames.get(spectator)
        if made is None:
            if spectator or self.raw[:1] != b"{":
                item = load_json(self.raw)
                if spectator:
                    item["legal_commands"] = []
                made = dump_json({"type": "decision", **item})
            else:
                made = '{"type":"decision",' + self.raw[1:].decode()
            self._frames[spectator] = made
        return made

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Decision) and other.raw == self.raw

    __hash__ = None  # type: ignore[assignment]


Delivered = Published | Decision


class EventFanout:
    """``linger_ms``: after a read that brought entries, the reader waits that long before
    it reads again (``CARAVEL_FANOUT_LINGER_MS``; :class:`~shared.bus.Follower`). At a human
    pace every read brought one or two entries and named every partition's two streams with
    their positions: half of a lobby's Python CPU at 300 tables (``benchmarks/README.md``,
    "the lobby's fan-out")."""

    def __init__(self, redis: Redis, keys: Keys, block_ms: int = 1000, linger_ms: int = 0) -> None:
        self.redis = redis
        self.keys = keys
        self.block_ms = block_ms
        # Its subscribers (on a cluster, one per event and decision stream) read on a pool of
        # their own.
        self.broker = Broker(redis, readers=2 * keys.partitions, service="lobby")
        self._listeners: dict[str, set[asyncio.Queue[Delivered]]] = {}
        self._decisions = {keys.decisions(p) for p in keys.all_partitions()}
        self._games = Counter[int]()  # partition → its games with a listener here
        self._follower = Follower(
            self.broker, self._deliver, batch=BATCH, block_ms=block_ms, linger_ms=linger_ms
        )
        self._changing = asyncio.Lock()

    @property
    def streams(self) -> list[str]:
        """The streams read now: those of the partitions with a game listened to."""
        return self._follower.streams

    @asynccontextmanager
    async def listen(self, game_id: str) -> AsyncIterator[asyncio.Queue[Delivered]]:
        """A queue of the game's notifications (:class:`Published`) and decision requests
        (:class:`Decision`) appended from now on, while in the block. A request usually
        comes after the notification of its version (not always)."""
        queue: asyncio.Queue[Delivered] = asyncio.Queue()
        queues = self._listeners.setdefault(game_id, set())
        p = self.keys.partition(game_id)
        if not queues:
            self._games[p] += 1
        queues.add(queue)
        try:
            await self._follow(p)
            yield queue
        finally:
            queues.discard(queue)
            if not queues and self._listeners.get(game_id) is queues:
                del self._listeners[game_id]
                self._games[p] -= 1
                await self._unfollow(p)

    async def close(self) -> None:
        """Stop reading (at shutdown, before the Redis client goes away)."""
        self._listeners.clear()
        self._games.clear()
        async with self._changing:
            await self._follower.close()
        await self.broker.stop()  # its subscribers' own pool

    def _streams_of(self, p: int) -> list[str]:
        return [self.keys.events(p), self.keys.decisions(p)]

    async def _follow(self, p: int) -> None:
        """Read partition ``p``'s streams from their tails taken now on (a partition read
        already keeps its position: it is behind now, not ahead)."""
        streams = self._streams_of(p)
        if all(s in self._follower for s in streams):
            return
        async with self._changing:
            missing = [s for s in streams if s not in self._follower]
            if not missing:
                return
            await self.broker.connect()
            for stream, after in (await newest_ids(self.redis, missing)).items():
                await self._follower.add(stream, after)

    async def _unfollow(self, p: int) -> None:
        """Stop reading partition ``p`` unless one of its games is listened to again."""
        async with self._changing:
            if self._games[p] > 0:
                return  # someone came back meanwhile
            del self._games[p]
            for stream in self._streams_of(p):
                await self._follower.remove(stream)

    async def _deliver(self, deliveries: list[Delivery]) -> None:
        """Parse each entry of a game listened to, once, and hand it to its queues."""
        for d in deliveries:
            item: Delivered
            if d.stream in self._decisions:
                raw = d.fields[b"r"]
                head = decision_head(raw)
                if head.game_id not in self._listeners:
                    continue  # another game's
                item = Decision(raw, head)
                game_id = head.game_id
            else:
                game_id = d.fields[b"g"].decode()
                if game_id not in self._listeners:
                    continue
                item = Published.of(Notification.from_fields(d.fields))
            for queue in self._listeners.get(game_id, ()):
                queue.put_nowait(item)
