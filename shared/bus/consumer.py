"""Reading partition streams through consumer groups, on FastStream, without losing anything.

Every service that reads the bus does it through a :class:`GroupConsumer`: FastStream
``StreamSub`` batch subscribers on a ``RedisBroker`` over the service's own Redis client, the
acknowledgement left to the service (``AckPolicy.MANUAL``: the engine acknowledges inside its
atomic append script). This module is the one adapter for what FastStream 0.7 does not do
(the parts that need FastStream's classes below its public API, the multi-stream reads
among them, are in :mod:`.faststream_ext`, pinned by a test):

- On one Redis, one subscriber reads all of a consumer's streams (partitions) in one
  XREADGROUP and hands their new entries on as one batch (``SharedRead``): a subscriber per
  stream pays a read and a dispatch per stream with anything new, at a few commands per
  partition one per command. On a Redis Cluster each stream keeps a subscriber of its own,
  whose reads go to the stream's node.

- Groups are created from the start of the stream (id ``0``) before a subscriber starts, so
  a group made after events were written still sees them all. (``StreamSub(last_id="0")``
  creates it so, but then reads the consumer's own history for ever, never ``>``, once the
  group exists already.)
- Reclaiming: every ``claim_idle_ms`` / 2 the entries another consumer left pending that long
  (it died, or could not handle them) are taken over (``XAUTOCLAIM``) in batches and handed
  to the same handler, one stream at a time with its subscriber; an entry delivered
  ``max_deliveries`` times, once ``dead_after_ms`` old, goes to the dead-letter stream with
  the reason instead (a fault reclaims every pending entry again: counts alone are not
  failures). FastStream's
  ``min_idle_time`` subscriber claims one entry per call, knows no delivery count on Redis
  before 8.4, and polls without pause while the pending list holds busy entries.
- A stream whose group vanished (a Redis restarted without its data): FastStream stops the
  subscriber for good; here the group is made again, from the start, and it restarts.
- A failed read (a connection cut: Redis restarted, a failover) is retried after 0.1 s,
  doubling up to ``READ_RETRY_S`` (0.5 s), not FastStream's fixed 5 s, which held every
  new entry of a stream that long after the cut.
- Streams can be added and removed while running (the engine's partitions change hands), and
  a newly added stream's pending entries can be handled before any new one (``drain``).

Redis never redelivers a pending entry by itself: an entry is retried only when a live
consumer reclaims it.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import structlog
from faststream import AckPolicy
from faststream.redis import RedisBroker
from prometheus_client import Counter
from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster
from redis.exceptions import ResponseError

from shared.contracts import DeadLetter, dump_json
from shared.loops import each, keep_running
from shared.redis_replies import text as _text

from . import tracing
from .connection import WaitingPool, is_cluster
from .faststream_ext import (
    Delivery,
    FixedStreamSub,
    GivenClientBroker,
    PlainBody,
    SharedFollow,
    SharedRead,
    decode_batch,
    make_shared,
    parse_batch,
    reads_retried,
    start_subscriber,
    stop_subscriber,
)
from .keys import Keys
from .metrics import DEAD_LETTERED, RECLAIMED, bus_metrics, channel
from .tails import newest_ids

log = logging.getLogger("caravel.bus")  # FastStream's lines (stdlib, through structlog's)
slog = structlog.get_logger("caravel.bus")

BLOCK_MS = 1000  # a subscriber's blocking read: entries arrive at once, this is only idle time
# The one read of a consumer's streams on one Redis: a stream added meanwhile waits this long.
SHARED_BLOCK_MS = 100
STOP_WAIT_S = 5.0  # stopping a subscriber waits this long for the batch it is handling
SPARE_CONNECTIONS = 4  # a subscriber pool's connections beyond one per stream


async def ensure_group(redis: Redis, stream: str, group: str) -> None:
    """Create ``group`` on ``stream`` from its very first entry (idempotent)."""
    try:
        await redis.xgroup_create(stream, group, id="0", mkstream=True)
    except ResponseError as e:
        if "BUSYGROUP" not in str(e):
            raise


Handler = Callable[[list[Delivery]], Awaitable[None]]


def _readers_client(client: Redis, readers: int) -> Redis:
    """A client of ``client``'s server with a pool of its own, one connection per blocking
    subscriber and a few more: per-stream subscribers must not use up (or wait for) the
    service's pool, which its handlers share. A cluster client keeps a pool per node and
    is used as it is."""
    if isinstance(client, RedisCluster):
        return client
    pool = client.connection_pool
    own = WaitingPool(
        connection_class=pool.connection_class,
        max_connections=readers + SPARE_CONNECTIONS,
        timeout=STOP_WAIT_S,
        **pool.connection_kwargs,
    )
    return Redis.from_pool(own)


class Broker(GivenClientBroker):
    """A FastStream ``RedisBroker`` on a service's Redis client, publishing plain bodies
    (publishing needs no :meth:`start`), counted in the metrics under ``service``
    (``bus_metrics``) and traced when an exporter is configured (``tracing``). With
    ``readers``, the number of streams it may subscribe to, its subscribers read on a pool
    of their own of that size (plus spares)."""

    def __init__(
        self, client: Redis, readers: int = 0, *, service: str = "caravel", **options: Any
    ) -> None:
        self._given = client if not readers else _readers_client(client, readers)
        self._owned = self._given is not client
        self.service = service
        traced = tracing.bus_middleware()
        self.traced = traced is not None
        self.metrics = bus_metrics(service)
        middlewares = (self.metrics,) + ((traced,) if traced is not None else ())
        options.setdefault("middlewares", middlewares)
        options.setdefault("message_format", PlainBody)
        options.setdefault("logger", log)
        options.setdefault("log_level", logging.DEBUG)  # a line per batch is for debugging
        options.setdefault("graceful_timeout", STOP_WAIT_S)
        # Handlers take the decoded batch as it is: no FastDepends call model per batch
        # (argument resolution and validation, ~3% of the engine's CPU in a py-spy profile).
        options.setdefault("apply_types", False)
        super().__init__(**options)

    @property
    def client(self) -> Redis:
        """The Redis client its subscribers read with."""
        return self._given

    async def publish_in(
        self,
        pipe: Any,
        body: bytes,
        stream: str,
        correlation_id: str | None = None,
        *,
        maxlen: int | None = None,
    ) -> None:
        """Publish ``body`` on ``stream`` as one command of ``pipe`` (a pipeline or transaction
        of this broker's client): sent when ``pipe`` executes, its entry id among the results.
        FastStream awaits the call it queues, and awaiting a redis-py cluster pipeline starts
        it over (its queue emptied, the entry lost); the adapter only queues. A command is
        published with its id as the correlation id (in traces; else FastStream draws a
        ``uuid4`` for each message). ``maxlen``: the stream is trimmed to about that many
        entries."""
        queued: Any = _Queued(pipe)
        await self.publish(
            body, stream=stream, pipeline=queued, correlation_id=correlation_id, maxlen=maxlen
        )

    def published_outside(self, stream: str, duration_s: float) -> None:
        """Count a body a script appended to ``stream`` as this broker's publication (the
        series FastStream's publish keeps: a lobby's moves are counted however they went)."""
        series = self.metrics.published(channel(stream))
        series.published["success"].inc()
        series.duration.observe(duration_s)

    async def drop_idle_connections(self) -> None:
        """Close the subscribers' idle connections (a pool of their own): after a Redis
        restart they are all dead, and a subscriber restarting on them would fail once per
        connection before it found a live one."""
        if self._owned:
            await self._given.connection_pool.disconnect(inuse_connections=False)


class _Queued:
    """A pipeline as :meth:`Broker.publish_in` hands it to FastStream: it queues XADDs."""

    def __init__(self, pipe: Any) -> None:
        self._pipe = pipe

    async def xadd(self, *args: Any, **kwargs: Any) -> None:
        self._pipe.xadd(*args, **kwargs)


def follow(
    broker: RedisBroker,
    stream: str,
    after: str,
    batch: int,
    handle: Handler,
    block_ms: int = BLOCK_MS,
) -> Any:
    """A FastStream subscriber reading ``stream`` without a consumer group (``XREAD``), in
    batches, from the entry after ``after``. Its position is its ``last_id``, moved past a
    batch before the batch is handled: a reader that keeps positions of its own (scoring's
    SQL checkpoints) sets it back from inside ``handle`` when a batch fails (no read of the
    stream is in flight then). Start it with ``await subscriber.start()``."""
    subscriber = broker.subscriber(
        stream=FixedStreamSub(
            stream, batch=True, max_records=batch, last_id=after, polling_interval=block_ms
        ),
        parser=parse_batch,
        decoder=decode_batch,
        persistent=False,
    )
    subscriber(handle)
    return reads_retried(subscriber)


class Follower:
    """Follows any number of streams without a consumer group (``XREAD``), each from a
    position of its own, and hands their new entries to ``handle`` in batches (one batch
    may hold several streams' entries, each stream's in order). On one Redis one FastStream
    subscriber reads them all (``SharedFollow``): a subscriber per stream paid a read and
    a dispatch per stream with anything new, at a few entries per partition one per entry.
    On a cluster each stream has a subscriber of its own (:func:`follow`), whose reads go
    to its node. A stream's position moves past a batch before the batch is handled: a
    reader that keeps positions of its own sets it back from inside ``handle``
    (:meth:`rewind`; no read is in flight then).

    With ``linger_ms``, the shared read (one Redis) waits that long after any read that
    brought entries (not a full batch) before it reads again: a reader woken for one entry
    at a time (the lobby's fan-out at a human pace) pays its XREAD of every stream, and
    the round trip, per few entries, not per entry; an entry written meanwhile is that much
    later. On a cluster, the per-stream subscribers do not linger."""

    def __init__(
        self,
        broker: Broker,
        handle: Handler,
        *,
        batch: int,
        block_ms: int = BLOCK_MS,
        linger_ms: int = 0,
    ) -> None:
        self.broker = broker
        self.handle = handle
        self.batch = batch
        self.block_ms = block_ms
        self.linger_ms = linger_ms
        self._one_read = not is_cluster(broker.client)
        self._shared: Any = None  # the one subscriber of every stream, once made
        self._subscribers: dict[str, Any] = {}  # stream → its subscriber (or the shared one)

    @property
    def streams(self) -> list[str]:
        return list(self._subscribers)

    def __contains__(self, stream: str) -> bool:
        return stream in self._subscribers

    async def add(self, stream: str, after: str) -> None:
        """Read ``stream``'s entries after ``after`` from now on (a stream followed already
        keeps its position)."""
        if stream in self._subscribers:
            return
        if not self._one_read:
            subscriber = follow(self.broker, stream, after, self.batch, self.handle, self.block_ms)
        else:
            subscriber = self._shared or self._make_shared(stream)
            subscriber.stream_sub.positions[stream] = after
        self._subscribers[stream] = subscriber
        if not subscriber.running:
            await start_subscriber(subscriber)

    def _make_shared(self, first: str) -> Any:
        """The one subscriber of every stream (named for the first: its metrics' channel).
        Its reads block :data:`SHARED_BLOCK_MS` at most: a stream added meanwhile is read
        from the next one on."""
        subscriber = follow(self.broker, first, "0-0", self.batch, self.handle, SHARED_BLOCK_MS)
        self._shared = make_shared(subscriber, SharedFollow, self.broker.client)
        subscriber.stream_sub.linger_s = self.linger_ms / 1000
        subscriber.stream_sub.linger_from = 1
        return subscriber

    def rewind(self, stream: str, position: str) -> None:
        """Read ``stream`` again after ``position`` (from inside ``handle``)."""
        subscriber = self._subscribers[stream]
        if subscriber is self._shared:
            subscriber.stream_sub.positions[stream] = position
        else:
            subscriber.last_id = position

    async def remove(self, stream: str) -> None:
        """Stop reading ``stream``."""
        subscriber = self._subscribers.pop(stream, None)
        if subscriber is None:
            return
        if subscriber is self._shared:
            del subscriber.stream_sub.positions[stream]
            if subscriber.stream_sub.positions:
                return
            self._shared = None
        await stop_subscriber(subscriber, STOP_WAIT_S)

    async def close(self) -> None:
        """Stop reading every stream (the batch being handled, if any, is finished first)."""
        for stream in list(self._subscribers):
            await self.remove(stream)


class Coalesced:
    """Batches of many per-stream subscribers handled as one (a :data:`Handler`).

    Each partition stream has its own subscriber, so at a few commands per partition a
    batch holds one or two entries, and a handler that pays a round trip per batch (the
    engine's append) pays it per entry. Here, whoever brings a batch while none is being
    handled handles it together with every batch that arrives meanwhile, round after round,
    until none waits; the others wait for their round's outcome (its error too). A stream's
    order holds: its subscriber reads its next batch only once its current one is handled.
    """

    def __init__(self, handler: Handler) -> None:
        self._handler = handler
        self._waiting: list[tuple[list[Delivery], asyncio.Future[None]]] = []
        self._handling = False

    async def __call__(self, deliveries: list[Delivery]) -> None:
        done = asyncio.get_running_loop().create_future()
        self._waiting.append((deliveries, done))
        if not self._handling:
            self._handling = True
            try:
                await asyncio.sleep(0)  # the other subscribers' reads that are ready join in
                while self._waiting:
                    taken, self._waiting = self._waiting, []
                    await self._round(taken)
            finally:
                self._handling = False
                # Stopped (cancelled) mid-way: whoever still waits is told; its entries stay
                # pending, to be reclaimed.
                self._settle(self._waiting, RuntimeError("stopped before handling the batch"))
                self._waiting = []
        await done

    async def _round(self, taken: list[tuple[list[Delivery], asyncio.Future[None]]]) -> None:
        try:
            await self._handler([d for batch, _ in taken for d in batch])
        except Exception as error:  # each batch's subscriber gets it
            self._settle(taken, error)
        except BaseException as error:  # cancelled: stopping
            self._settle(taken, error)
            raise
        else:
            self._settle(taken, None)

    @staticmethod
    def _settle(
        taken: list[tuple[list[Delivery], asyncio.Future[None]]], error: BaseException | None
    ) -> None:
        for _, done in taken:
            if done.done():
                continue
            if error is None:
                done.set_result(None)
            elif isinstance(error, Exception):
                done.set_exception(error)
            else:
                done.cancel()


class GroupConsumer:
    """One consumer of one group over any number of streams, whose batches go to ``handle``
    (which acknowledges what it is done with). On one Redis, one FastStream subscriber reads
    them all (``SharedRead``); on a cluster, each stream has a batch subscriber of its own.
    A stream's batches are handled one at a time, in order, and never beside its reclaim."""

    def __init__(
        self,
        broker: Broker,
        redis: Redis,
        group: str,
        consumer: str,
        keys: Keys,
        handle: Handler,
        *,
        batch: int = 200,
        max_deliveries: int = 5,
        dead_after_ms: int = 0,
        claim_idle_ms: int = 10_000,
        linger_ms: int = 0,
        linger_from: int = 4,
        linger_max_ms: int = 0,
    ) -> None:
        self.broker = broker
        self.redis = redis
        self.group = group
        self.consumer = consumer
        self.keys = keys  # names the dead-letter stream of each partition
        self.handle = handle
        self.batch = batch
        self.max_deliveries = max_deliveries
        # An entry is dead-lettered only once this old too (its id's time): see :meth:`claim`.
        self.dead_after_ms = dead_after_ms
        self.claim_idle_ms = claim_idle_ms
        self.linger_ms = linger_ms  # the shared read's wait after a busy read (one Redis)
        self.linger_from = linger_from  # a read this large is busy (:func:`_linger`)
        self.linger_max_ms = linger_max_ms  # busy reads in a row double the wait up to this
        self._subscribers: dict[str, Any] = {}  # stream → its subscriber (or the shared one)
        self._locks: dict[str, asyncio.Lock] = {}
        self._one_read = not is_cluster(redis)
        self._shared: Any = None  # the one subscriber of every stream, once made
        self._starting = asyncio.Lock()  # the shared subscriber's start (:meth:`_start`)

    @property
    def streams(self) -> list[str]:
        return list(self._subscribers)

    async def subscribe(self, stream: str) -> None:
        """Read ``stream`` from now on (its group made from the start if missing; its
        subscriber restarted if FastStream stopped it). To handle what is pending first,
        :meth:`reclaim` it with no idle time before.

        A stream whose Redis fails now (its shard away or refusing writes: the group cannot
        be made) is read once it answers: its subscriber is kept, unstarted, and started
        by the next :meth:`revive`. Raising instead left it out for good: a service that
        subscribes to every partition in turn at its start (the views projection, the bot
        player) stopped at the first partition of a shard in a fault and never read the
        following ones (issue 25)."""
        if stream in self._subscribers:
            await self._revive(stream)
            return
        self._locks.setdefault(stream, asyncio.Lock())
        if self._one_read:
            subscriber = self._shared or self._make_shared(stream)
        else:
            subscriber = self._subscriber(stream, BLOCK_MS, self._on_stream_batch(stream))
        try:
            await ensure_group(self.redis, stream, self.group)
        except Exception:  # on one Redis, the shared read finds the group missing: revived
            slog.warning("subscriber not started yet", stream=stream, exc_info=True)
        if self._one_read:
            subscriber.stream_sub.streams[stream] = None
        self._subscribers[stream] = subscriber
        if not subscriber.running:
            try:
                await self._start(subscriber)
            except Exception:  # its shard fails: :meth:`revive` starts it
                slog.warning("subscriber not started yet", stream=stream, exc_info=True)

    def _subscriber(self, stream: str, block_ms: int, handle: Handler) -> Any:
        subscriber = self.broker.subscriber(
            stream=FixedStreamSub(
                stream,
                group=self.group,
                consumer=self.consumer,
                batch=True,
                max_records=self.batch,
                polling_interval=block_ms,
            ),
            ack_policy=AckPolicy.MANUAL,
            parser=parse_batch,
            decoder=decode_batch,
            persistent=False,
            title=f"{stream}:{self.group}",
        )
        subscriber(handle)
        return reads_retried(subscriber)

    def _on_stream_batch(self, stream: str) -> Handler:
        lock = self._locks[stream]

        async def on_batch(deliveries: list[Delivery]) -> None:
            async with lock:
                await self.handle(deliveries)

        return on_batch

    def _make_shared(self, first: str) -> Any:
        """The one subscriber of every stream (named for the first: its metrics' channel)."""
        subscriber = self._subscriber(first, SHARED_BLOCK_MS, self._on_shared_batch)
        self._shared = make_shared(subscriber, SharedRead, self.broker.client)
        subscriber.stream_sub.linger_s = self.linger_ms / 1000
        subscriber.stream_sub.linger_from = self.linger_from
        subscriber.stream_sub.linger_max_s = self.linger_max_ms / 1000
        return subscriber

    async def _on_shared_batch(self, deliveries: list[Delivery]) -> None:
        """The batch handled with its streams' locks held, taken in one order (a reclaim
        holds one at most); acquired and released by hand, not through an exit stack per
        batch."""
        locks = self._locks
        held: list[asyncio.Lock] = []
        try:
            for stream in sorted({d.stream for d in deliveries}):
                lock = locks[stream]
                await lock.acquire()
                held.append(lock)
            await self.handle(deliveries)
        finally:
            for lock in held:
                lock.release()

    async def unsubscribe(self, stream: str) -> None:
        """Stop reading ``stream`` (the batch being handled, if any, is finished first)."""
        subscriber = self._subscribers.pop(stream, None)
        if subscriber is None:
            return
        if subscriber is not self._shared:
            await stop_subscriber(subscriber, STOP_WAIT_S)
            return
        del subscriber.stream_sub.streams[stream]
        async with self._locks[stream]:
            pass  # a batch in hand with its entries is done
        if not subscriber.stream_sub.streams:
            await stop_subscriber(subscriber, STOP_WAIT_S)

    async def close(self) -> None:
        for stream in list(self._subscribers):
            await self.unsubscribe(stream)

    async def run(self, stop: asyncio.Event, on_error: Callable[[], None] | None = None) -> None:
        """Reclaim idle entries every ``claim_idle_ms`` / 2 until ``stop``, then stop every
        subscriber."""
        try:
            await keep_running(
                stop,
                self.reclaim_idle,
                slog,
                f"{self.group}: reclaiming failed; retrying",
                period_s=self.claim_idle_ms / 2000,
                on_error=on_error,
            )
        finally:
            await self.close()

    async def reclaim_idle(self) -> None:
        """Take over every stream's entries idle for ``claim_idle_ms``, each stream alone
        (one whose shard fails stops no other)."""
        await self.revive()
        streams = await self.with_idle(list(self._subscribers), self.claim_idle_ms)
        await each(streams, self._reclaim_idle, slog, "stream not reclaimed")

    async def with_idle(self, streams: Sequence[str], min_idle_ms: int) -> list[str]:
        """Those of ``streams`` with an entry pending longer than ``min_idle_ms``, asked in
        one round trip (an ``XPENDING … IDLE`` each, in a pipeline): reclaiming asked each
        stream apart (an ``XAUTOCLAIM`` round trip per partition and group every few
        seconds), nearly always for nothing. A stream whose answer is a fault (its group
        gone, its shard away) is among them: its reclaim meets the fault as before."""
        if not streams:
            return []
        async with self.redis.pipeline(transaction=False) as pipe:
            for stream in streams:
                pipe.xpending_range(stream, self.group, "-", "+", 1, idle=min_idle_ms)
            replies = await pipe.execute(raise_on_error=False)
        return [s for s, r in zip(streams, replies, strict=True) if isinstance(r, Exception) or r]

    async def _reclaim_idle(self, stream: str) -> None:
        await self.reclaim(stream, self.claim_idle_ms)

    async def revive(self) -> None:
        """Restart the subscribers FastStream stopped because their group vanished (a Redis
        restarted without its data): the group is made again, from the stream's start."""
        await each(list(self._subscribers), self._revive, slog, "subscriber not restarted")

    async def _revive(self, stream: str) -> None:
        subscriber = self._subscribers[stream]
        if not subscriber.running:
            slog.warning("subscriber stopped; restarting it", stream=stream, group=self.group)
            await self.broker.drop_idle_connections()
            await self._start(subscriber)

    async def _start(self, subscriber: Any) -> None:
        """Start ``subscriber`` with the groups of what it reads made from the start (the
        stream it is named for too: FastStream makes that one's group from ``$``). The
        shared subscriber is started once, under a lock: streams subscribed side by side
        (the engine's :meth:`~services.engine.worker.Engine.follow`) all found it stopped."""
        if subscriber is not self._shared:
            await self._start_now(subscriber)
            return
        async with self._starting:
            if not subscriber.running:
                await self._start_now(subscriber)

    async def _start_now(self, subscriber: Any) -> None:
        sub = subscriber.stream_sub
        for stream in {sub.name, *(sub.streams if subscriber is self._shared else ())}:
            await ensure_group(self.redis, stream, self.group)
        await start_subscriber(subscriber)

    async def reclaim(
        self,
        stream: str,
        min_idle_ms: int,
        still: Callable[[], bool] = lambda: True,
        held_off: Callable[[], None] = lambda: None,
    ) -> int:
        """Handle the entries of ``stream`` pending longer than ``min_idle_ms``, batch by
        batch while ``still()`` holds, with the stream's subscriber held off (``held_off``
        is called once it is: a batch the subscriber read meanwhile waits until these older
        entries are handled); returns how many were handled.

        One pass over the pending list, on ``XAUTOCLAIM``'s cursor: each entry is claimed
        once per reclaim. Claimed again from the list's start, an entry the handler left
        pending (its partition not this engine's for the moment) was claimed again in the
        same reclaim, batch after batch, each claim a delivery more, until dead-lettered:
        the dead-letter count counted this owner's claims, not failed handlings (issue 25)."""
        handled = 0
        cursor = "0-0"
        async with self._locks.setdefault(stream, asyncio.Lock()):
            held_off()
            while still():
                batch, cursor = await self.claim(stream, min_idle_ms, self.batch, cursor)
                if batch:
                    self._count(RECLAIMED, stream, len(batch))
                    await self.handle(batch)
                    handled += len(batch)
                if cursor == "0-0":  # the pending list's end
                    break
        return handled

    async def claim(
        self, stream: str, min_idle_ms: int, count: int, start: str = "0-0"
    ) -> tuple[list[Delivery], str]:
        """Take over up to ``count`` entries pending longer than ``min_idle_ms`` from
        ``start`` on (XAUTOCLAIM); dead-letter the ones delivered too often that are
        ``dead_after_ms`` old. Returns the entries to handle again, in order, and where the
        next claim starts ("0-0": the pending list is done).

        A delivery is counted whether its handling failed or a fault came first: every
        restart of Redis, or of the consumer, reclaims (and counts) every pending entry
        again. Counted alone, a few Redis kills in a row dead-lettered a bot's command or
        decision request that had never failed a handler, and its game waited for good
        (issue 25, the chaos benchmark on one Redis). An entry that keeps failing for that
        long is dead-lettered all the same."""
        try:
            reply: Any = await self._autoclaim(stream, min_idle_ms, count, start)
        except ResponseError as e:
            if "NOGROUP" not in str(e):
                raise
            await ensure_group(self.redis, stream, self.group)
            reply = await self._autoclaim(stream, min_idle_ms, count, start)
        cursor = _text(reply[0])
        claimed = [(_text(i), f) for i, f in reply[1] if f is not None]
        if not claimed:
            return [], cursor
        pending: Any = await self.redis.xpending_range(
            stream,
            self.group,
            min=claimed[0][0],
            max=claimed[-1][0],
            count=len(claimed) + 64,
            consumername=self.consumer,
        )
        times = {_text(p["message_id"]): p["times_delivered"] for p in pending}
        born_before = time.time() * 1000 - self.dead_after_ms  # old enough to give up on
        out = []
        for entry_id, fields in claimed:
            delivery = Delivery(stream, entry_id, fields)
            delivered = times.get(entry_id, 1)
            if delivered > self.max_deliveries and _made_ms(entry_id) <= born_before:
                await self.dead_letter(delivery, f"delivered {delivered} times without success")
            else:
                out.append(delivery)
        return out, cursor

    def _autoclaim(self, stream: str, min_idle_ms: int, count: int, start: str) -> Awaitable[Any]:
        return self.redis.xautoclaim(
            stream, self.group, self.consumer, min_idle_ms, start_id=start, count=count
        )

    async def caught_up(self) -> bool:
        """Every entry of every subscribed stream delivered and acknowledged (for tools and
        tests that wait for a consumer to be done, instead of sleeping)."""
        for stream in list(self._subscribers):
            groups: Any = await self.redis.xinfo_groups(stream)
            mine = next(g for g in groups if _text(g["name"]) == self.group)
            last = (await newest_ids(self.redis, [stream]))[stream]
            if mine["pending"] or _text(mine["last-delivered-id"]) != last:
                return False
        return True

    async def dead_letter(self, delivery: Delivery, reason: str) -> None:
        """Move an entry to its partition's dead-letter stream (with why) and acknowledge
        it, in one transaction (one slot: the stream's)."""
        record = DeadLetter(
            stream=delivery.stream,
            id=delivery.id,
            group=self.group,
            reason=reason,
            fields=dump_json({_text(k): _text(v) for k, v in delivery.fields.items()}),
        )
        dead = self.keys.dead_letters(self.keys.partition_of(delivery.stream))
        async with self.redis.pipeline(transaction=True) as pipe:
            await self.broker.publish_in(pipe, record.model_dump_json().encode(), dead)
            pipe.xack(delivery.stream, self.group, delivery.id)
            await pipe.execute()
        self._count(DEAD_LETTERED, delivery.stream, 1)

    def _count(self, counter: Counter, stream: str, n: int) -> None:
        """What FastStream's middleware does not see (``shared.bus.metrics``)."""
        counter.labels(self.broker.service, channel(stream), self.group).inc(n)

    async def ack(self, deliveries: Sequence[Delivery]) -> None:
        """Acknowledge ``deliveries``: one XACK per stream, all in one round trip (a
        pipeline; on a cluster, redis-py sends each node its own)."""
        by_stream: dict[str, list[str]] = {}
        for d in deliveries:
            by_stream.setdefault(d.stream, []).append(d.id)
        if len(by_stream) == 1:
            [(stream, ids)] = by_stream.items()
            await self.redis.xack(stream, self.group, *ids)
        elif by_stream:
            async with self.redis.pipeline(transaction=False) as pipe:
                for stream, ids in by_stream.items():
                    pipe.xack(stream, self.group, *ids)
                await pipe.execute()


def _made_ms(entry_id: str) -> int:
    """When a stream entry was added (its id's milliseconds, Redis's clock)."""
    return int(entry_id.partition("-")[0])
