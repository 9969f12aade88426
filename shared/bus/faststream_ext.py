"""The one module that reaches below FastStream's public API: what FastStream 0.7 lacks,
built on its subscriber and broker classes, with every private name it relies on here and
nowhere else. ``tests/backbone/test_faststream_ext.py`` pins each of them (and the version
checked against), so an upgrade that changes one fails there, by name, not in production.

A decision, measured, not a leftover. The private names that remain, exactly:

- ``faststream.redis.subscriber.usecases.stream_subscriber.StreamBatchSubscriber``:
  subclassed; its read step ``_get_msgs`` replaced and ``consume_one`` called with the
  batch; a subscriber made by ``broker.subscriber`` has its ``__class__`` swapped for the
  subclass (:func:`make_shared`, :func:`reads_retried`). (A shared read uses the broker's
  client, kept on its ``FixedStreamSub``, not the subscriber's private ``_client``.)
- ``faststream.redis.configs.RedisConnectionState``: subclassed (:class:`GivenClient`, which
  sets its ``_client`` and ``_connected``), and ``RedisBroker._make_connection_state``
  overridden (:class:`GivenClientBroker`).

(``StreamSub.add_prefix``, overridden by :class:`FixedStreamSub`, is a public method of a
public class.) The raw batch the parser reads and the shared reads build (its keys
``type``, ``channel``, ``data``, ``message_ids``) is the ``raw_message`` of FastStream's
exported ``faststream.redis.RedisBatchStreamMessage``, the type a batch subscriber's parser
hook is given: pinned through that export, not ``faststream.redis.message``. No longer
used: a subscriber's ``tasks`` (``TasksMixin``), which :func:`stop_subscriber` read to
await the read task (our read step keeps the task it runs in, :attr:`Read.reader`);
``stream_subscriber.CONSUME_ERROR_BACKOFF_SECONDS``, which this module wrote for the whole
process (the read step now waits out a failed read itself).

Why each stays, and what the public route would cost:

- Multi-stream reads (:class:`SharedRead`, :class:`SharedFollow`): FastStream reads one
  stream per subscriber; on one Redis a consumer's partitions are read by one XREADGROUP
  (or XREAD) and handed on as one batch, starting, stopping, middlewares and the handler's
  call staying FastStream's; the batch has the shape of FastStream's own plus the stream of
  each entry. No public route: the read step is not a documented hook, middlewares see
  messages after the read. The public alternative, a batch subscriber per stream (as on a
  cluster), was measured (``benchmarks/README.md``, "One read or a subscriber per stream"):
  at 2,000 moves/s +11 % to +64 % engine CPU per move (three alternated pairs), 3 to 6 times
  the reads per move, and at 8 entries read 6.3 times the dispatch instructions (8 batches
  of one entry instead of one of 8); under load it fell behind where this kept up. Again
  on branch ``busapi3`` (nine alternated pairs at 2,000, 1,000 and 500 commands/s): it fell
  behind in eight runs, and at 500/s cost +23 % to +54 % engine CPU per command. Proposed
  upstream, with a patch against 0.7.8 and a test: ``docs/upstream/faststream-multi-stream-
  read.md`` (``subscriber.add_stream``/``remove_stream``, one batch per read); with it this
  part becomes a few public calls in ``consumer.py``, as that document shows.
- The read retry (:data:`READ_RETRY_S`, in the replaced read step): FastStream's back-off
  after a failed read is a module constant of 5 s, and a read the server refuses
  (NOREPLICAS, CLUSTERDOWN) is re-raised out of its read loop, whose task supervisor
  restarts it at once, a busy loop for as long as the refusal lasts. No public setting.
- :func:`stop_subscriber`: FastStream's ``stop`` cancels a subscriber's read task without
  awaiting it, and has no public way to await it; the read is awaited before the broker
  closes the pool under it, known as the task that ran our read step (:attr:`Read.reader`).
- :class:`GivenClientBroker`: a broker on a Redis client the service made (hiredis packing,
  a waiting pool (``WaitingPool``) of its own for blocking reads, or the service's pool for a
  publishing broker; ``ShardedCluster`` on a cluster). FastStream 0.7.8's constructor only
  builds a ``ConnectionPool`` of its own from connection options (``connection_class``,
  ``parser_class``, ``max_connections``): not the same pool (it raises when full instead of
  waiting), one pool more per publishing broker, and no route to a cluster client of ours.
  On one Redis those options would do (hiredis through ``parser_class``, an unbounded pool
  for the one shared read), but ``RedisClusterBroker`` builds a plain ``RedisCluster``
  (``RedisClusterConnectionState.connect``), without ``ShardedCluster``'s isolation of a
  node's fault (``.connection``), and two ways to make a broker is one too many:
  the given client stays, for both.
- :class:`FixedStreamSub`: FastStream deep-copies a ``StreamSub`` to add the broker's prefix
  several times per read (about 5% of the engine's CPU); ours have no prefix.
- :func:`parse_batch`/:func:`decode_batch` (parser and decoder hooks, public): the raw
  batch's keys (``RedisBatchStreamMessage.raw_message``), read without FastStream's JSON
  round trip of each entry; FastStream's own batch parser keeps neither each entry's id
  nor its stream in public fields (a batch message has one ``message_id``).

The last four are listed as further gaps in the upstream document. The rest is FastStream's
public API (``faststream``, ``faststream.redis``): the plain bodies (:class:`PlainBody`, its
exported ``BinaryMessageFormatV1`` given to the broker's ``message_format``), the body
field (:data:`BODY`, its wire format, pinned by publishing), the parser and decoder hooks;
the bus metrics are series of our own (``.metrics``). So is :meth:`GivenClientBroker.start`
(``connect``, ``publishers``), which starts no subscriber: FastStream's starts every
subscriber the broker still holds, stopped ones too; ours are each started and stopped by
their owner.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Iterable
from itertools import repeat
from typing import Any, NamedTuple, Self

from faststream import StreamMessage
from faststream.redis import BinaryMessageFormatV1, RedisBroker, StreamSub
from faststream.redis.configs import RedisConnectionState
from faststream.redis.subscriber.usecases import stream_subscriber
from redis.asyncio import Redis
from redis.exceptions import ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

from shared.loops import logged_failure, traceback_due
from shared.redis_replies import text

from .connection import wait_or_remapped
from .metrics import channel

CHECKED_VERSION = "0.7"
"""The FastStream release (major.minor) this module was checked against."""

# A subscriber whose read failed reads again after a delay (FastStream: 5 s, a module
# constant of its own, left alone: our read step waits itself): READ_RETRY_FIRST_S after
# the first failure of a run, doubling up to READ_RETRY_S, back to the first after a read
# that succeeds. Short, so a shard back from a failover (its slot map re-read, NOREPLICAS
# over) is read again within about half the cap (issue 25: a fixed 1 s held the hit shard's
# decisions and events up to a second after its shard took writes again); capped, so a
# Redis down for good costs each subscriber two error lines a second, not a busy loop.
READ_RETRY_FIRST_S = 0.1
READ_RETRY_S = 0.5

log = logging.getLogger("caravel.bus")  # the brokers' logger (``consumer.Broker``)

# The field of a stream entry FastStream publishes a message in (its wire format, pinned by
# a test that publishes through a broker and reads the entry back).
BODY = b"__data__"


class Delivery(NamedTuple):
    """One stream entry as a handler gets it: its stream, id and fields. A named tuple, not
    a frozen dataclass: one is made per entry read, and a frozen dataclass sets each field
    through ``object.__setattr__``."""

    stream: str
    id: str
    fields: dict[bytes, bytes]


class GivenClient(RedisConnectionState):
    """The broker's connection: a client made by the service, closed by the broker only if
    it was made for it (``owned``)."""

    def __init__(self, client: Redis, owned: bool) -> None:
        super().__init__({})
        self._client = self._given = client
        self._owned = owned

    async def connect(self) -> Any:
        self._connected = True
        return self._client

    async def disconnect(self) -> None:
        self._connected = False
        if self._owned:
            await self._given.connection_pool.disconnect()


class GivenClientBroker(RedisBroker):
    """A ``RedisBroker`` on ``self._given`` (set before ``__init__``), which it closes only
    if ``self._owned``; its :meth:`start` starts no subscriber."""

    _given: Redis
    _owned: bool

    def _make_connection_state(
        self, connection_options: dict[str, Any], kwargs: dict[str, Any]
    ) -> Any:
        return GivenClient(self._given, self._owned)

    async def start(self) -> None:
        """Connect (no round trip: the client is given) and start the publishers, but no
        subscriber: each is started by whoever made it (:func:`start_subscriber`), when it
        is wanted, and stopped by it (:func:`stop_subscriber`).

        FastStream's start also starts every subscriber the broker holds
        (``BrokerUsecase.start``: ``for sub in self.subscribers: await sub.start()``), and
        it holds ours in a weak set (``persistent=False``) where a stopped one lingers until
        a cyclic collection frees it (rare in a serving process: ``tune_collector``). So a
        service's start tried again after a failed one (taken back: its subscribers
        stopped) started the stopped subscribers again, reading beside the new ones, and
        their first read, not answered in 3 s (Redis stopped, restarting, or a machine
        loaded many times over), raised the built-in ``TimeoutError`` out of
        ``broker.start()``: not a fault the start waits out, so the bot player's task ended
        (issue 25)."""
        await self.connect()
        for publisher in self.publishers:
            await publisher.start()
        self.running = True


class PlainBody(BinaryMessageFormatV1):
    """Messages published as their body alone (a contract's JSON), with no FastStream
    headers in front: every reader, FastStream or not, parses the field as it is. A message
    format of FastStream's public API (``RedisBroker(message_format=...)``): its exported
    format with ``encode`` and ``parse`` replaced. Bytes are sent as they are; anything
    else as the broker's codec encodes it (a string as its UTF-8, a dict as its JSON)."""

    @classmethod
    async def encode(
        cls,
        *,
        message: Any,
        reply_to: str | None,
        headers: dict[str, Any] | None,
        correlation_id: str,
        serializer: Any = None,
        codec: Any = None,
    ) -> bytes:
        if isinstance(message, bytes):  # every body the project publishes
            return message
        if codec is None:  # the broker hands its codec; without one, a body is bytes
            raise TypeError(f"a bus message is bytes, not {type(message).__name__}")
        payload, _ = await codec.encode(message, serializer)
        return bytes(payload)

    @classmethod
    def parse(cls, data: bytes) -> tuple[bytes, dict[str, Any]]:
        return data, {}


class FixedStreamSub(StreamSub):
    """A ``StreamSub`` that is not copied on every read (see the module's docstring)."""

    streams: dict[str, None]  # a shared read's streams (``SharedRead``), in order
    client: Redis  # a shared read's client (the broker's, :func:`make_shared`)
    positions: dict[str, str]  # a shared follow's streams and the entry each is read after
    # A shared read that brought at least ``linger_from`` entries (but not a full batch)
    # waits this long before reading again (0: never): see :func:`_linger`. A read as busy
    # since the read before doubles the wait, up to ``linger_max_s`` (at most ``linger_s``:
    # constant); ``lingering`` is the last wait (0: none since a quiet read).
    linger_s: float = 0.0
    linger_from: int = 4
    linger_max_s: float = 0.0
    lingering: float = 0.0
    read_at: float = 0.0  # when the last read came (the loop's clock)

    def add_prefix(self, prefix: str) -> Self:
        return self if not prefix else super().add_prefix(prefix)


async def _retried(read: Awaitable[None], subscriber: Any) -> None:
    """Run a read step, the task running it kept as ``subscriber.reader`` (:class:`Read`);
    a failure is logged and the step returns after a delay (:data:`READ_RETRY_FIRST_S`,
    doubling with each failure in a row up to :data:`READ_RETRY_S`),
    FastStream's read loop then reads again (as it does after its own back-off, 5 s, which
    this one replaces). A group gone (NOGROUP) is FastStream's: it stops the subscriber,
    and the consumer makes the group again. A refusal (NOREPLICAS: XREADGROUP writes, and a
    master short of replicas refuses it; CLUSTERDOWN; WRONGTYPE) is retried like a cut
    connection: FastStream re-raises it out of the read loop, and its task supervisor starts
    the loop again at once, a busy loop of PING and XREADGROUP per stream for as long as a
    shard refuses writes."""
    reader = subscriber.reader
    if reader is None or reader.done():  # its first read, or FastStream started a new loop
        subscriber.reader = asyncio.current_task()  # ~0.5 µs here: not on every read
    try:
        await read
    except ResponseError as e:
        if "NOGROUP" in str(e):
            raise
        await _wait_after(e, subscriber)
    except Exception as e:
        await _wait_after(e, subscriber)
    else:
        if subscriber.read_failures:
            subscriber.read_failures = 0


async def _wait_after(error: Exception, subscriber: Any) -> None:
    """FastStream's line for a failed read (same logger, level and message), then the wait.
    The first failure of a run is logged with its traceback (one of a kind a process every
    few seconds: :func:`shared.loops.traceback_due`), the 2nd, 4th, 8th... with its error
    and count alone, the others not at all (:func:`shared.loops.logged_failure`)."""
    subscriber.read_failures += 1
    failures = subscriber.read_failures
    if logged_failure(failures):
        stream = channel(subscriber.stream_sub.name)
        if failures == 1 and traceback_due(error):
            log.error("Message fetch error", exc_info=error, extra={"channel": stream})
        else:
            extra = {"channel": stream, "failures": failures, "error": repr(error)}
            log.error("Message fetch error", extra=extra)
    await wait_or_remapped(read_retry_s(failures))


def read_retry_s(failures: int) -> float:
    """The wait after the ``failures``-th failed read in a row."""
    return float(min(READ_RETRY_S, READ_RETRY_FIRST_S * 2 ** min(failures - 1, 16)))


class Read(stream_subscriber.StreamBatchSubscriber):
    """A FastStream batch subscriber whose read step is ours: :func:`_retried` keeps the task
    running it (:func:`stop_subscriber` awaits it), an attribute of this class, not
    FastStream's."""

    __slots__ = ()

    reader: asyncio.Task[Any] | None = None  # set on the instance by each read step
    read_failures: int = 0  # failed reads in a row (set on the instance)


class StreamRead(Read):
    """FastStream's batch reader of one stream, its failed reads retried (:func:`_retried`)."""

    __slots__ = ()

    async def _get_msgs(self, read: Any) -> None:
        await _retried(super()._get_msgs(read), self)


def reads_retried(subscriber: Any) -> Any:
    """``subscriber`` (made by ``broker.subscriber``, batch, not yet started) as a
    :class:`StreamRead`."""
    subscriber.__class__ = StreamRead
    return subscriber


class SharedRead(Read):
    """One XREADGROUP of every stream in its ``FixedStreamSub.streams``; their new entries
    go to the handler as one batch."""

    __slots__ = ()

    async def _get_msgs(self, read: Any) -> None:
        await _retried(self._read_all(), self)

    async def _read_all(self) -> None:
        sub: Any = self.stream_sub
        if not sub.streams:
            await asyncio.sleep(sub.polling_interval / 1000)
            return
        response: Any = await sub.client.xreadgroup(
            groupname=sub.group,
            consumername=sub.consumer,
            streams=dict.fromkeys(sub.streams, ">"),
            count=sub.max_records,
            block=sub.polling_interval,
        )
        read_at = asyncio.get_running_loop().time()
        # A stream dropped while the read was under way is skipped: left pending, reclaimed.
        await _hand_on(self, sub, response, sub.streams)
        if sub.linger_s:
            await _linger(sub, sum(len(entries) for _, entries in response or ()), read_at)


async def _linger(sub: FixedStreamSub, read: int, read_at: float) -> None:
    """After a busy read (``read`` entries, at least ``sub.linger_from`` but not a full
    batch), wait so that the next read brings more: a handler's cost per batch (the read,
    FastStream's dispatch, the engine's append round trip, about 0.57 ms of the engine's
    CPU quiet) is spread over more entries. A busy read waits ``sub.linger_s``; one that
    came after a wait and brought at least ``linger_from`` a ``linger_s`` of the time since
    the read before (2,000 commands/s for the engine's 4 a 2 ms: the bus's rate, however
    long the wait, the handling or a starved process took) waits twice the wait before it,
    up to ``sub.linger_max_s``: a bus busy read after read (4,000 commands/s) is read every
    20 ms or so, about 90 commands a read, while a burst (a bot player's few moves) or a
    slower bus waits ``linger_s``, and a quiet one (reads of fewer, or none) is read again
    at once. A full batch (behind) is read again at once and keeps the wait. A follower
    (:class:`SharedFollow`) lingers from one entry on (``linger_from``), a constant wait
    (no ``linger_max_s``)."""
    since, sub.read_at = read_at - sub.read_at, read_at  # from the read before: its
    # handling, the wait, this read (``read_at``: when it came, the loop's clock)
    wait = linger_wait(sub, read, since)
    if wait is None:
        return
    sub.lingering = wait
    if wait:
        await asyncio.sleep(wait)


def linger_wait(sub: FixedStreamSub, read: int, since: float) -> float | None:
    """The wait :func:`_linger` takes after a read of ``read`` entries that came ``since``
    seconds after the read before, by ``sub``'s settings and the wait before it
    (``sub.lingering``): None after a full batch (read again at once, the wait kept), 0
    after a quiet read (at once, the wait set back). Apart from the clock, so that its
    rule is tested by its inputs and not by a loaded machine's timings."""
    if read >= (sub.max_records or read + 1):
        return None
    if read < sub.linger_from:
        return 0.0
    before = sub.lingering  # the wait before this read (0: none)
    if before and read * sub.linger_s >= sub.linger_from * since:
        return min(2 * before, max(sub.linger_max_s, sub.linger_s))
    return sub.linger_s


class SharedFollow(Read):
    """The group-less counterpart of :class:`SharedRead`: one XREAD of every stream in
    ``FixedStreamSub.positions``, each after its own position, moved past its entries
    before the batch is handled (FastStream's ``last_id`` does the same for one stream).
    It lingers after a read as :class:`SharedRead` does (:func:`_linger`), once the batch
    is handled: the next read starts from the positions the batch moved, so nothing is
    skipped or read twice, and a stream's entries stay in order."""

    __slots__ = ()

    async def _get_msgs(self, read: Any) -> None:
        await _retried(self._read_all(), self)

    async def _read_all(self) -> None:
        sub: Any = self.stream_sub
        positions: dict[str, str] = sub.positions
        if not positions:
            await asyncio.sleep(sub.polling_interval / 1000)
            return
        reading: dict[Any, Any] = dict(positions)
        response: Any = await sub.client.xread(
            streams=reading, count=sub.max_records, block=sub.polling_interval
        )
        read_at = asyncio.get_running_loop().time()
        await _hand_on(self, sub, response, positions, positions=True)
        if sub.linger_s:
            await _linger(sub, sum(len(entries) for _, entries in response or ()), read_at)


async def start_subscriber(subscriber: Any) -> None:
    """Start ``subscriber``; a start that times out raises redis-py's ``TimeoutError``
    (transient: :func:`shared.bus.faults.transient`), not the built-in one.

    FastStream's ``start`` waits 3 s at most (``anyio.fail_after(3.0)``) for the first PING
    of the read task it starts, and raises the built-in ``TimeoutError`` past that: a Redis
    restarting (LOADING its AOF) or a machine loaded many times over (CI: the whole suite on
    2 cores) answers later. The services retry a start only on a transient error, so a
    scoring process started during a chaos run's kills took the built-in one for a mistake:
    its task ended, and the process lived on scoring nothing. Its read task still runs then:
    the caller stops the subscriber (the services' start undoes itself) before it retries."""
    try:
        await subscriber.start()
    except TimeoutError as e:
        raise RedisTimeoutError("a subscriber's first read was not answered within 3 s") from e


async def stop_subscriber(subscriber: Any, wait_s: float) -> None:
    """Stop ``subscriber`` and wait (``wait_s`` at most) until its read task has ended.

    FastStream's ``stop`` cancels the read task without awaiting it (with no public way to
    await it: here it is the task that ran our read step, :attr:`Read.reader`);
    a broker stopped next closes the pool under a read that is still winding down (the
    cancellation does not always win against the read's reply), which then fails as
    "Message fetch error" (seen on every fourth stop of ``caravel up``: the bot player's
    follower of the seat changes, its broker stopped right after). Awaited here, the read
    is over before anyone closes its connection."""
    reader = subscriber.reader  # None: it never read
    await subscriber.stop()
    # Stopped from its own read, or its read over already: nothing to wait for.
    if reader is not None and reader is not asyncio.current_task() and not reader.done():
        await asyncio.wait([reader], timeout=wait_s)


def make_shared(subscriber: Any, kind: type[SharedRead] | type[SharedFollow], client: Redis) -> Any:
    """``subscriber`` (made by ``broker.subscriber`` with a :class:`FixedStreamSub`, not yet
    started) as a multi-stream reader of ``kind``, its streams empty, reading with ``client``
    (its broker's)."""
    sub = subscriber.stream_sub
    if kind is SharedRead:
        sub.streams = {}
    else:
        sub.positions = {}
    sub.client = client
    subscriber.__class__ = kind
    return subscriber


async def _hand_on(
    subscriber: Any, sub: Any, response: Any, reading: dict[str, Any], positions: bool = False
) -> None:
    """The entries of a read of several streams, to ``subscriber``'s handler as one batch,
    named for the streams' channel (partition ``{p}``) in metrics, traces and logs. Only
    the streams still in ``reading`` count; with ``positions``, it maps each stream to the
    entry it is read after, moved to the stream's last entry here. ``sub`` is the
    subscriber's ``stream_sub``, fetched once per read (FastStream's property composes the
    broker's prefix on every access)."""
    streams: list[str] = []
    ids: list[bytes] = []
    data: list[dict[bytes, bytes]] = []
    for stream, entries in response or ():
        name = text(stream)
        if name not in reading or not entries:
            continue
        if positions:
            reading[name] = text(entries[-1][0])
        for entry_id, fields in entries:
            streams.append(name)
            ids.append(entry_id)
            data.append(fields)
    if ids:
        # The shape of FastStream's own batch (``RedisBatchStreamMessage.raw_message``), plus
        # the stream of each entry.
        batch = {
            "type": "bstream",
            "channel": channel(sub.name),
            "data": data,
            "message_ids": ids,
            "streams": streams,
        }
        await subscriber.consume_one(batch)


async def parse_batch(raw: Any) -> StreamMessage[Any]:
    """A batch as it came: no JSON round trip of every entry (the handler parses the
    fields it needs, once). Its first entry's id is its correlation id too: FastStream
    draws a ``uuid4`` for a message without one (6% of a batch's dispatch)."""
    ids = raw["message_ids"]
    first = text(ids[0]) if ids else ""
    return StreamMessage(
        raw_message=raw, body=b"", headers={}, message_id=first, correlation_id=first or None
    )


async def decode_batch(message: StreamMessage[Any]) -> Any:
    """The batch's entries as :class:`Delivery` values, each named for its stream."""
    raw = message.raw_message
    ids = raw["message_ids"]
    streams = raw.get("streams") or [raw["channel"]] * len(ids)
    # Built in C (``map``), without a Python step per entry (its id decoded by ``text``,
    # the named tuple's own ``__new__``).
    return list(
        map(_new_tuple, repeat(Delivery), zip(streams, _texts(ids), raw["data"], strict=True))
    )


_new_tuple = tuple.__new__  # a named tuple made from its fields, without its ``__new__``


def _texts(values: list[Any]) -> Iterable[str]:
    """Replies' ids as text: decoded in C when all are bytes (always, from our clients),
    else each through :func:`text`."""
    try:
        return list(map(bytes.decode, values))
    except TypeError:
        return map(text, values)
