"""Redis clients for every service: asyncio, with commands packed by hiredis.

redis-py's asyncio connections pack commands in pure Python, which costs the engine more
than its rules do (an append carries a couple of dozen arguments). The synchronous client
already packs with hiredis; these connection classes do the same for asyncio.

``CARAVEL_REDIS_URL`` may name a Redis Cluster: ``redis+cluster://host:port,host:port``
(``rediss+cluster://`` with TLS; any node will do, more survive one being down). The
services then get a ``RedisCluster``, typed as the plain client: its commands are the same,
and what a cluster refuses (one read across slots, a transaction across slots) the key
layout and the readers avoid.

On a cluster, one node's fault stays with the commands sent to it (issue 25): redis-py's
client closes the connections of every node when one command meets a node away or a
cluster down (commands on the healthy nodes fail under their feet), and a pipeline spanning
several nodes fails as a whole, and is sent again as a whole, when one of them is away.
:class:`ShardedCluster` re-reads the slot map instead, and sends each node's part of a
pipeline on its own: a node's fault is the reply of its commands only.
"""

from __future__ import annotations

import asyncio
import math
import random
import time
from collections.abc import Sequence
from contextvars import ContextVar
from typing import Any, TypeGuard, cast
from urllib.parse import unquote, urlsplit

import hiredis
import structlog
from redis._parsers.commands import AsyncCommandsParser
from redis.asyncio import BlockingConnectionPool, Redis
from redis.asyncio.cluster import ClusterNode, ClusterPipeline, NodesManager, RedisCluster
from redis.asyncio.connection import (
    AbstractConnection,
    Connection,
    UnixDomainSocketConnection,
)
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import DataError, ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

from shared.redis_replies import text as _text

_log = structlog.get_logger("caravel.bus")


def _pack(args: tuple[Any, ...]) -> list[bytes]:
    """A command packed by hiredis; a name of several words (``"CLIENT ID"``) split as
    redis-py splits it. A one-word name (every hot command) is packed as it is: splitting
    it rebuilt the whole argument tuple, 3 % of the lobby's Python samples a move."""
    name = args[0]
    if " " in name if isinstance(name, str) else b" " in name:
        args = tuple(name.encode().split() if isinstance(name, str) else name.split()) + args[1:]
    try:
        return [hiredis.pack_command(args)]
    except TypeError as e:
        raise DataError(str(e)) from None


class _Sends(AbstractConnection):
    """A command sent into the socket at once, without a task of its own.

    redis-py sends under its socket timeout (5 s by default) with ``asyncio.wait_for``,
    which makes a task per command, and so a loop iteration and a timer, to write bytes the
    socket almost always takes at once: 71k instructions of a PING's 308k (cachegrind), the
    "socket writes" of the pipeline's py-spy profiles. Here the command is written and, when
    the socket took all of it, that is the end of the send (``drain`` would not wait);
    only bytes left buffered are waited for, under the timeout, by redis-py's own send, as
    are a connection not made yet or closing, a health check due, and a failed write.

    A connection closed under the send (redis-py's cluster client disconnects a node's
    connections when one of its commands meets the node away, while other tasks send on
    them) fails as a :class:`redis.exceptions.ConnectionError`, as a refused or reset one
    does: on uvloop the write raised ``RuntimeError: unable to perform operation on
    <TCPTransport closed=True ...>; the handler is closed`` (and without it,
    ``AttributeError`` once the writer was dropped), which redis-py's cluster client does
    not retry and the HTTP API answered 500 during a failover."""

    async def send_packed_command(self, command: Any, check_health: bool = True) -> None:
        try:
            await self._send(command, check_health)
        except (RuntimeError, AttributeError) as error:
            if not _closed_under(error):
                raise
            await self.disconnect(nowait=True)
            message = f"the connection was closed under a send: {error}"
            raise RedisConnectionError(message) from error

    async def _send(self, command: Any, check_health: bool) -> None:
        writer = self._writer
        if (
            writer is None
            or not isinstance(command, list)
            or (check_health and self.health_check_interval)
            or writer.transport.is_closing()
        ):
            await super().send_packed_command(command, check_health)
            return
        try:
            writer.writelines(command)
        except BaseException:
            await self.disconnect(nowait=True)
            raise
        if writer.transport.get_write_buffer_size():  # the socket is full: wait, timed
            await super().send_packed_command([], False)

    async def replies(self, count: int) -> list[Any]:
        """The next ``count`` replies, an error reply as its exception (not raised: every
        reply is read, so the connection stays in step and goes back to its pool).

        redis-py's ``read_response`` times each reply under its socket timeout with an
        ``asyncio.timeout`` (a timer, the task's cancellation scope) and its fault
        handling: ~7 µs a reply of the ~34 µs of CPU a two-command round trip took,
        paid on every move of the lobby (issue 24, `lobby12`). Here the parser's replies
        are read under one watchdog for the whole read (a timer that aborts the socket
        when the socket timeout passes with no reply; the read then fails as redis-py's
        ``TimeoutError``). A read that fails (the timeout, a socket closed or cut, a
        cancellation) disconnects, as redis-py's does: replies are left unread."""
        parser: Any = self._parser
        if not self.is_connected:
            raise RedisConnectionError("the connection was closed before its replies came")
        expired: list[bool] = []
        timeout = self.socket_timeout
        watchdog = None
        if timeout is not None and timeout != math.inf:
            watchdog = asyncio.get_running_loop().call_later(timeout, self._expire, expired)
        try:
            out = [await parser.read_response() for _ in range(count)]
        except BaseException as error:
            await self.disconnect(nowait=True)
            if expired:
                raise RedisTimeoutError(f"Timeout reading from {self._host_error()}") from None
            if isinstance(error, OSError):
                message = f"Error while reading from {self._host_error()} : {error.args}"
                raise RedisConnectionError(message) from error
            raise
        finally:
            if watchdog is not None:
                watchdog.cancel()
        if self.health_check_interval:
            next_time = asyncio.get_running_loop().time() + self.health_check_interval
            self.next_health_check = next_time
        return out

    def _expire(self, expired: list[bool]) -> None:
        """The watchdog of :meth:`replies`: the socket timeout passed, the read is cut."""
        expired.append(True)
        writer = self._writer
        if writer is not None:
            writer.transport.abort()


def _closed_under(error: RuntimeError | AttributeError) -> bool:
    """Whether a send's ``error`` is its connection's transport closed (uvloop) or its
    writer dropped (redis-py's disconnect) while it wrote."""
    text = str(error)
    if isinstance(error, RuntimeError):
        return "the handler is closed" in text or "closed=True" in text
    return "'NoneType' object has no attribute" in text


class WaitingPool(BlockingConnectionPool):
    """redis-py's pool that waits for a connection (a burst queues, not fails), with a free
    connection taken and given back at once when no caller waits.

    redis-py's takes its condition, a timer and its observability events (wait time,
    connection counts, a release event) for every command: 62k of a PING's 300k
    instructions (cachegrind). Here a caller finding a free connection and nobody queued
    before it takes it, and one giving a connection back while nobody waits puts it back:
    there is no one to wake. Whoever must wait, and every release while someone does, goes
    through redis-py's own, so waiting callers are served as before."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._waiting = 0  # callers in redis-py's get_connection

    async def get_connection(self, *args: Any, **kwargs: Any) -> Any:
        if self._waiting or not self._available_connections:
            self._waiting += 1
            try:
                return await super().get_connection()  # type: ignore[no-untyped-call]
            finally:
                self._waiting -= 1
        connection = self._available_connections.pop()
        self._in_use_connections.add(connection)
        try:
            await self.ensure_connection(connection)
        except BaseException:
            await self.release(connection)
            raise
        return connection

    async def release(self, connection: AbstractConnection) -> None:
        if self._waiting or self._in_maintenance:
            await super().release(connection)
            return
        self._in_use_connections.remove(connection)
        if connection.should_reconnect():  # type: ignore[no-untyped-call]
            await connection.disconnect()
        self._available_connections.append(connection)


class HiredisConnection(_Sends, Connection):
    def pack_command(self, *args: Any) -> list[bytes]:
        return _pack(args)


class HiredisUnixConnection(_Sends, UnixDomainSocketConnection):
    def pack_command(self, *args: Any) -> list[bytes]:
        return _pack(args)


CLUSTER_SCHEMES = ("redis+cluster", "rediss+cluster")

# The cluster client's socket timeout (redis-py's default is 5 s): above the longest command
# that blocks on the server, the lobby's wait for the engine's answer (a BLMOVE of at most
# ``command_timeout_s``, 10 s by default, when taken in one piece; the sender takes it in
# 1 s slices today) and the bot's wait for a view (an XREAD of up to 2 s). A node that
# stops answering is given up after this long.
CLUSTER_SOCKET_TIMEOUT_S = 15.0
# A node that does not accept a connection this soon is taken for away: a failover is under
# way, and waiting on it would hold the callers' other shards too.
CLUSTER_CONNECT_TIMEOUT_S = 2.0
# redis-py sends a command (or a whole pipeline) again after a node's fault this many times,
# the slot map read again in between (a pipeline 0.25 s later): once finds the new master
# after a failover; more only makes a caller wait on a node that is away.
CLUSTER_RETRIES = 1
# The slot map is read again at most this often. redis-py re-reads it (CLUSTER SLOTS) after
# every command that meets a node away, under a lock every command of the client waits on:
# while a master failed over, the commands of the healthy shards queued behind hundreds of
# re-reads of the same map (180 in 3 s in a probe, the other shards at 7-35% of their
# rate). A failover is found within this much more. It was 0.5 s while each re-read built
# the map (3 ms of CPU with redis-py 8.1, far more before); a re-read that finds the same
# masters builds nothing now (0.06 ms of CPU: :meth:`ShardedCluster._slots_now`), and the
# hit shard's games waited up to the whole interval after its new master was elected
# (the engines win its leases back once their map names it: issue 25, `failover11`).
CLUSTER_SLOTS_REREAD_S = 0.1


def is_cluster_url(url: str) -> bool:
    return url.split("://", 1)[0] in CLUSTER_SCHEMES


def is_cluster(client: Any) -> TypeGuard[RedisCluster]:
    """Whether ``client`` is a cluster client. By its type, remembered: redis-py's command
    mixins are ``typing.Protocol`` classes, so an ``isinstance`` against a client class walks
    them every time (~7% of the engine's CPU when its appends asked it per call)."""
    cls = type(client)
    known = _CLUSTER_CLASSES.get(cls)
    if known is None:
        known = _CLUSTER_CLASSES[cls] = issubclass(cls, RedisCluster)
    return known


_CLUSTER_CLASSES: dict[type, bool] = {}


def connect(url: str, wait_s: float | None = None, **options: Any) -> Redis:
    """An asyncio client for ``url`` (``redis://``, ``rediss://`` or ``unix://``; a cluster
    by ``redis+cluster://``). With ``wait_s``, a command finding every connection of the
    pool in use waits that long for one (then ``ConnectionError``) instead of failing at
    once: a burst queues, not fails. (A cluster's pools, one per node, do not wait.)"""
    if is_cluster_url(url):
        return cast(Redis, _cluster(url, **options))
    if wait_s is None:
        client = Redis.from_url(url, **options)
    else:
        client = Redis.from_pool(WaitingPool.from_url(url, timeout=wait_s, **options))
    pool = client.connection_pool
    if pool.connection_class is UnixDomainSocketConnection:
        pool.connection_class = HiredisUnixConnection
    elif pool.connection_class is Connection:
        pool.connection_class = HiredisConnection
    return client


def _cluster(url: str, **options: Any) -> RedisCluster:
    """A cluster client from every node the URL names, packing with hiredis."""
    parts = urlsplit(url)
    if parts.path.strip("/") or parts.query:
        raise ValueError(f"a cluster URL names nodes only (no database, no options): {url}")
    auth, _, hosts = parts.netloc.rpartition("@")
    user, _, password = auth.partition(":")
    nodes = []
    for node in hosts.split(","):
        host, _, port = node.strip().rpartition(":")
        if not host or not port.isdigit():
            raise ValueError(f"a cluster node is host:port, not {node!r} (in {url})")
        nodes.append(ClusterNode(host, int(port)))
    options.setdefault("socket_timeout", CLUSTER_SOCKET_TIMEOUT_S)
    options.setdefault("socket_connect_timeout", CLUSTER_CONNECT_TIMEOUT_S)
    options.setdefault("retry", _Retries(NoBackoff(), CLUSTER_RETRIES))
    # A slot without a master (a shard away for good) fails its own commands only: with
    # full coverage required, the client refuses to read the slot map, so every command.
    options.setdefault("require_full_coverage", False)
    client = ShardedCluster(
        startup_nodes=nodes,
        username=unquote(user) or None,
        password=unquote(password) or None,
        ssl=parts.scheme == "rediss+cluster",
        **options,
    )
    client.commands_parser = _StreamKeysParser()
    if client.connection_kwargs["connection_class"] is Connection:
        # The nodes found later are made with these arguments; the startup ones already are.
        client.connection_kwargs["connection_class"] = HiredisConnection
        for startup in client.startup_nodes:
            startup.connection_class = HiredisConnection
    return client


# Set while a command or a pipeline of a :class:`ShardedCluster` runs (in its task).
_IN_COMMAND: ContextVar[bool] = ContextVar("caravel_cluster_command", default=False)
# Set while :meth:`ShardedCluster.execute_command` has redis-py send a command once (it
# decides on the retry itself): redis-py's retry count reads 0 then (:class:`_Retries`).
_ONCE: ContextVar[bool] = ContextVar("caravel_cluster_once", default=False)


class _Retries(Retry):
    """The cluster client's retries: :data:`CLUSTER_RETRIES`, but none for redis-py's own
    loop around a single command (:meth:`ShardedCluster.execute_command` retries it)."""

    def get_retries(self) -> int:
        return 0 if _ONCE.get() else super().get_retries()


class _Queued:
    """A command's arguments as a pipeline's queue holds them (for :func:`_moved_from`)."""

    __slots__ = ("args",)

    def __init__(self, args: tuple[Any, ...]) -> None:
        self.args = args


class ShardedCluster(RedisCluster):
    """redis-py's cluster client, with one node's fault kept to that node's commands (see
    the module's docstring)."""

    _slots_read_at = -math.inf  # when the slot map was last read (monotonic)
    _rereading: asyncio.Task[None] | None = None  # a re-read of the slot map under way
    _slots_masters: Any = None  # the masters' CLUSTER SLOTS the slot map was last built after
    _moves_seen = 0  # :data:`_slot_moves` when it was built

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.nodes_manager.__class__ = _KeptNodes  # the one change: see its docstring

    async def initialize(
        self,
        additional_startup_nodes_info: list[tuple[str, int]] | None = None,
        last_failed_node_name: str | None = None,
    ) -> ShardedCluster:
        """Read the slot map: the first time, before any command; after that in the
        background, at most every :data:`CLUSTER_SLOTS_REREAD_S` and one read at a time,
        while the commands go on with the map they have (one sent again after its node's
        fault, ``last_failed_node_name``, waits for a read under way: it is after the new
        map). A map just read is the one a re-read would give, unless a MOVED changed it
        since (:meth:`_KeptNodes.move_slot`): then the map is read again at once, and waited
        for (the node a MOVED names may not be there: the caller's retry needs the map).

        redis-py has every command of the client wait for a re-read, under a lock, and a
        caller queued on that lock reads again if another command met the node away
        meanwhile: while a master was away, with a few dozen subscribers failing on it, the
        re-reads (0.1-0.5 s each on a loaded machine) came back to back and held every
        command of the healthy shards for seconds (benchmarks/README.md, `failover8`)."""
        if not self._initialize:
            return self
        if self._slots_read_at == -math.inf:  # no map yet
            await super().initialize(additional_startup_nodes_info, last_failed_node_name)
            self._slots_read_at = time.monotonic()
            return self
        self._initialize = False
        reading = self._rereading
        moved = _slot_moves != self._moves_seen  # a MOVED changed the map: known stale
        due = time.monotonic() - self._slots_read_at >= CLUSTER_SLOTS_REREAD_S
        if reading is None and (due or moved):
            reading = self._rereading = asyncio.create_task(self._reread(last_failed_node_name))
        if reading is not None and (last_failed_node_name is not None or moved):
            await asyncio.wait([reading])  # not cancelled with this caller
        return self

    async def _reread(self, last_failed_node_name: str | None) -> None:
        """One re-read of the slot map; a failure leaves the map as it was (the next
        command to meet a node away asks again)."""
        try:
            moves = _slot_moves
            masters = await self._slots_now(last_failed_node_name)
            unchanged = masters is not None and masters == self._slots_masters
            if unchanged and moves == self._moves_seen:
                return  # the same masters for the same slots: nothing to build again
            await self.nodes_manager.initialize(last_failed_node_name=last_failed_node_name)
            await self.commands_parser.initialize(self.nodes_manager.default_node)
            _wake_remap_waiters()  # another master: what waits on the old one goes on
            self._slots_masters, self._moves_seen = masters, moves
        except Exception as error:
            _log.warning("slot map not read again", error=repr(error))
        finally:
            self._slots_read_at = time.monotonic()
            self._rereading = None

    async def _slots_now(self, failed: str | None) -> Any:
        """The slot map's masters as the first node to answer gives them (CLUSTER SLOTS,
        :func:`_masters`; the node that failed last asked last; None: no node answered). A
        re-read whose reply is the one the map was built after builds nothing: redis-py's
        walks every one of the 16,384 slots three times, in Python, at each re-read, and
        while a master is away, until its replica takes over, the map does not change (the
        same node holds the same slots).
        Those re-reads were the lobby's largest cost of a failover: a fifth of its CPU in
        the seconds after a master's kill, when the healthy shards' requests took 0.8 s
        (median) instead of 0.07 (the chaos benchmark on a loaded machine; issue 25)."""
        nodes = list(self.nodes_manager.startup_nodes.values())
        random.shuffle(nodes)  # as redis-py does: not always the same node's view
        nodes.sort(key=lambda node: node.name == failed)
        for node in nodes:
            try:
                reply = await node.execute_command("CLUSTER SLOTS")
            except Exception:
                continue
            return _masters(reply)
        return None

    async def execute_command(self, *args: Any, **kwargs: Any) -> Any:
        """redis-py's, but a command that meets its node away is sent again only if the
        slot map, read again, now sends it to another node (a failover found), as a
        pipeline's part is (:func:`_sent`). redis-py sent it again at once, the map read
        again only when due (at most every :data:`CLUSTER_SLOTS_REREAD_S`): to the same
        dead node, a refused connect more, or on a host lost a connect timeout more (2 s)."""
        token = _IN_COMMAND.set(True)
        once = _ONCE.set(True)
        try:
            try:
                return await super().execute_command(*args, **kwargs)
            except RedisCluster.ERRORS_ALLOW_RETRY as error:
                target = kwargs.get("target_nodes")
                if not CLUSTER_RETRIES or (target is not None and not self._is_node_flag(target)):
                    raise  # a node named: redis-py sends it once too
                failed = getattr(error, "last_failed_node_name", None)
                if failed and not await _moved_from(self, failed, [_Queued(args)]):
                    raise
            return await super().execute_command(*args, **kwargs)
        finally:
            _ONCE.reset(once)
            _IN_COMMAND.reset(token)

    async def aclose(self) -> None:
        """Close every connection; but called by redis-py itself on a node's fault, under a
        command (a CLUSTERDOWN, a node away under a pipeline), only have the slot map read
        again before the next command: the commands on the other nodes go on."""
        if _IN_COMMAND.get():
            self._initialize = True
            return
        if self._rereading is not None:
            self._rereading.cancel()
            await asyncio.wait([self._rereading])
        await super().aclose()

    def pipeline(self, transaction: Any | None = None, shard_hint: Any | None = None) -> Any:
        if shard_hint or transaction:  # one slot's transaction, or redis-py's refusal
            return super().pipeline(transaction, shard_hint)
        return NodePipeline(self)  # type: ignore[abstract]  # redis-py's own makes one so


_remap_waiters: set[asyncio.Future[None]] = set()  # callers of :func:`wait_or_remapped`


async def wait_or_remapped(seconds: float) -> None:
    """Sleep ``seconds``, or less if a cluster client of this process finds another master
    for some slots meanwhile (a re-read of its slot map after a failover, or a MOVED).

    A subscriber whose read met a shard away (``faststream_ext._wait_after``) waits between
    tries, up to 0.5 s: after a failover its next try came up to that long after the new
    map was read, the hit shard's games waiting for it (issue 25)."""
    waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    _remap_waiters.add(waiter)
    try:
        await asyncio.wait([waiter], timeout=seconds)
    finally:
        _remap_waiters.discard(waiter)


def _wake_remap_waiters() -> None:
    for waiter in _remap_waiters:
        if not waiter.done():
            waiter.set_result(None)
    _remap_waiters.clear()


def _masters(reply: Any) -> list[tuple[Any, ...]]:
    """A CLUSTER SLOTS reply as the slot ranges and the master of each (host, port): what
    routes this client's commands (it reads no replica). Nodes list a range's replicas in
    orders of their own, and a node back as a replica changes only them: compared whole,
    the replies of the nodes taken in turn differed at nearly every re-read of a failover,
    each building the map again."""
    return sorted((r[0], r[1], r[2][0], r[2][1]) for r in reply)


_slot_moves = 0  # redirections (MOVED) the cluster clients of this process applied to their maps


class _KeptNodes(NodesManager):
    """redis-py's record of the cluster's nodes, whose slot-map re-read keeps the
    connections of every node still there in the same role.

    redis-py marks every connection of every node for reconnecting at each re-read (in
    case a connection's READONLY state went stale; this client never reads from replicas,
    so none has any): while a master failed over, each re-read (every
    :data:`CLUSTER_SLOTS_REREAD_S`) had every process reconnect all its connections to the
    healthy nodes as well, a connect and a handshake each (the bot player holds one per
    stream it follows: 128 on a cluster of 64 partitions). A node that changed role (a
    master become a replica) or is gone still has its connections closed."""

    __slots__ = ()  # as redis-py's (a client's record is turned into this one in place)

    async def move_slot(self, e: Any) -> None:
        """redis-py's: a slot given to the node a MOVED names, in this map alone; and the
        map no longer the one its kept masters describe (:meth:`ShardedCluster._reread`):
        the next re-read builds it again, whatever CLUSTER SLOTS says. A MOVED naming a node
        that is not (or no longer) there left that node in the map for good, every re-read
        finding the cluster's masters unchanged (a cluster-wide SCAN then met it refused).

        What waits for another master (:func:`wait_or_remapped`) goes on: after a master's
        failover its killed node, started again, answers as a replica within 0.1 s, and a
        command sent there on the old map is redirected to the new master without a
        re-read: the engine's regain of the hit shard's leases waited on for its next
        tick (issue 25, `failover11`)."""
        global _slot_moves
        await super().move_slot(e)
        _slot_moves += 1
        _wake_remap_waiters()  # a failover found this way too: see :func:`wait_or_remapped`

    def set_nodes(
        self, old: dict[str, ClusterNode], new: dict[str, ClusterNode], remove_old: bool = False
    ) -> None:
        same = [
            o for name, o in old.items() if name in new and o.server_type == new[name].server_type
        ]
        unmarked: list[Any] = [c for node in same for c in node._connections]
        unmarked = [c for c in unmarked if not c.should_reconnect()]
        super().set_nodes(old, new, remove_old)
        for connection in unmarked:
            connection.reset_should_reconnect()
        for node in old.values():
            if type(node) is ClusterNode:
                node.__class__ = _QuietNode


class _QuietNode(ClusterNode):
    """redis-py's node, whose free connections are closed after a command's fault only if
    they are open.

    redis-py closes every free connection of a node each time one of its commands meets
    the node away, one task per connection: a node killed under a few dozen subscribers
    keeps as many connections, none of them open, and each failed read (a few a second
    each) made as many tasks to close them again, 11,000 in 7 s in a probe of one process,
    the event loop too busy for the other shards' commands
    (benchmarks/README.md, `failover8`)."""

    __slots__ = ()  # as redis-py's (a node is turned into this one in place)

    async def disconnect_free_connections(self) -> None:
        open_ = [c for c in self._free if c.is_connected]
        if open_:
            await asyncio.gather(*(c.disconnect() for c in open_), return_exceptions=True)


class NodePipeline(ClusterPipeline):
    """A pipeline whose part for each node is sent as a pipeline of its own, all at once:
    a node away (refused, timed out, failing over) is the reply of each of its commands,
    the others' replies are the nodes' own. (redis-py's raises the first node's fault for
    all, after sending the whole pipeline again.)"""

    async def execute(self, raise_on_error: bool = True, allow_redirections: bool = True) -> Any:
        token = _IN_COMMAND.set(True)
        try:
            queue = list(self._execution_strategy._command_queue)  # type: ignore[attr-defined]
            groups = await self._by_node(queue)
            if len(groups) <= 1:
                name = groups[0][0] if groups else ""
                return await self._one_node(queue, name, raise_on_error, allow_redirections)
            await self.reset()  # type: ignore[no-untyped-call]
            parts = []
            for name, commands in groups:
                part = ClusterPipeline(self.cluster_client)  # type: ignore[abstract]
                for command in commands:
                    part.execute_command(*command.args, **command.kwargs)
                parts.append(_sent(part, name, False, allow_redirections))
            replies: list[Any] = [None] * len(queue)
            done: list[Any] = await asyncio.gather(*parts, return_exceptions=True)
            for (_, commands), reply in zip(groups, done, strict=True):
                for i, command in enumerate(commands):
                    replies[command.position] = reply if isinstance(reply, Exception) else reply[i]
            if raise_on_error:
                for reply in replies:
                    if isinstance(reply, Exception):
                        raise reply
            for reply in done:  # a cancellation, say: not a node's fault
                if isinstance(reply, BaseException) and not isinstance(reply, Exception):
                    raise reply
            return replies
        finally:
            _IN_COMMAND.reset(token)

    async def _one_node(
        self, queue: list[Any], name: str, raise_on_error: bool, allow_redirections: bool
    ) -> Any:
        """A pipeline for one node, sent as redis-py sends it; but the node's fault (away,
        timed out) is, unless raised for, the reply of each command, as it is in a pipeline
        for several nodes. It was raised: the engines' lease round, whose first pipeline
        holds the heartbeat alone (one global key), raised while that key's shard was away,
        and an engine started then took no partition of any shard (issue 25)."""
        try:
            return await _sent(self, name, raise_on_error, allow_redirections)
        except Exception as error:
            if raise_on_error:
                raise
            return [error] * len(queue)

    async def _by_node(self, queue: list[Any]) -> list[tuple[str, list[Any]]]:
        """The queued commands by the node they go to (its name), each group in order
        (those whose node is not known for now form a group of their own, named "":
        redis-py routes them)."""
        client: Any = self.cluster_client
        if client._initialize:
            await client.initialize()
        groups: dict[str, list[Any]] = {}
        for command in queue:
            target = command.kwargs.get("target_nodes")
            name = ""
            if isinstance(target, ClusterNode):
                name = target.name
            elif target is None:
                try:
                    slot = await client._determine_slot(*command.args)
                    name = client.nodes_manager.get_node_from_slot(slot).name
                except Exception:  # redis-py finds it (or fails it) on sending
                    name = ""
            groups.setdefault(name, []).append(command)
        return list(groups.items())


async def _sent(
    pipe: ClusterPipeline, node: str, raise_on_error: bool, allow_redirections: bool
) -> list[Any]:
    """The replies of ``pipe``, one node's commands (``node``, its name; "": not known),
    sent again after the node's fault only if the slot map, read again, now sends them
    elsewhere (a failover).

    redis-py sends a pipeline again after any node fault, 0.25 s later, whatever the map
    says: while a master was away, every batch with a call on its shard (a lobby's rate
    bucket, a lease, an engine's append) waited those 0.25 s to meet the same dead node
    again, and the healthy shards' requests whose checks included such a call took
    0.26 s at p90 for seconds after each kill (the chaos benchmark's ``--timings``)."""
    if not node:  # redis-py's own routing, and its retries
        return await ClusterPipeline.execute(pipe, raise_on_error, allow_redirections)
    strategy: Any = pipe._execution_strategy
    client: Any = pipe.cluster_client
    queue = list(strategy._command_queue)
    left = CLUSTER_RETRIES
    try:
        while True:
            try:
                if client._initialize:
                    await client.initialize()
                replies: list[Any] = await strategy._execute(
                    client,
                    strategy._command_queue,
                    raise_on_error=raise_on_error,
                    allow_redirections=allow_redirections,
                )
                return replies
            except RedisCluster.ERRORS_ALLOW_RETRY:
                if not left or not await _moved_from(client, node, queue):
                    raise
                left -= 1
    finally:
        await pipe.reset()  # type: ignore[no-untyped-call]


async def _moved_from(client: Any, node: str, queue: list[Any]) -> bool:
    """Whether the slot map, read again (one re-read at a time, at most every
    :data:`CLUSTER_SLOTS_REREAD_S`: see :meth:`ShardedCluster.initialize`), sends the
    first of ``queue``'s commands to another node than ``node``, the one that failed."""
    client._initialize = True
    await client.initialize(last_failed_node_name=node)
    try:
        slot = await client._determine_slot(*queue[0].args)
        return bool(client.nodes_manager.get_node_from_slot(slot).name != node)
    except Exception:  # no slot to find (a keyless command), none covered: redis-py decides
        return True


class _StreamKeysParser(AsyncCommandsParser):
    """Finds the keys of the bus's reads and script calls in the command itself. redis-py
    asks a server (``COMMAND GETKEYS``, one round trip to one node) for the keys of every
    command whose keys move (XREAD, XREADGROUP, FCALL): every blocking read of a stream
    would cost a round trip to that node before it goes to the stream's own."""

    async def initialize(self, node: Any = None) -> None:
        """Read the command table once, from the first node that gives it. redis-py reads it
        again at every re-read of the slot map, from the first master listed: while that
        master was away (killed, its shard not failed over), every command of the client
        failed with it, on every shard."""
        if node is not None:
            self.node = node
        if not self.commands:
            await super().initialize()

    async def get_keys(self, *args: Any) -> Any:
        name = _text(args[0]).upper() if args else ""
        if name in ("FCALL", "FCALL_RO") and len(args) >= 3:
            return list(args[3 : 3 + int(args[2])]) or None
        if name in ("XREAD", "XREADGROUP"):
            skip = 4 if name == "XREADGROUP" else 1  # GROUP <group> <consumer> is no option
            words = [_text(a).upper() for a in args[skip:]]
            if "STREAMS" in words:
                streams = args[skip + words.index("STREAMS") + 1 :]
                return list(streams[: len(streams) // 2])
        return await super().get_keys(*args)


async def round_trip(redis: Redis, commands: Sequence[tuple[Any, ...]]) -> list[Any]:
    """The replies of ``commands``, read-only ones, sent in one write on one connection of
    the pool (an error reply raised, as a pipeline raises it): a pipeline's round trip
    without redis-py's pipeline, whose making, queueing, retry wrapper and reset cost
    ~30 µs of CPU more than the round trip itself (issue 24: ``GET /legal``'s seat and
    pending decisions, read on every HTTP move); the replies read by
    :meth:`_Sends.replies`, not one ``read_response`` each. A cluster's commands (routed by their
    keys), and any that meet a connection fault, go through redis-py's pipeline and its
    retries: the commands only read, so sending them again changes nothing."""
    if is_cluster(redis):
        return await _pipelined(redis, commands)
    pool: Any = redis.connection_pool
    connection = await pool.get_connection()
    replies: list[Any] | None = None
    try:
        await connection.send_packed_command(connection.pack_commands(commands))
        replies = await connection.replies(len(commands))
    except (RedisConnectionError, RedisTimeoutError, OSError):
        await connection.disconnect()  # then sent again, the connection given back first
    finally:
        await pool.release(connection)
    if replies is None:
        return await _pipelined(redis, commands)
    for reply in replies:  # every reply read: the connection is in step for the next
        if isinstance(reply, ResponseError):
            raise reply
    return replies


async def _pipelined(redis: Redis | RedisCluster, commands: Sequence[tuple[Any, ...]]) -> list[Any]:
    """:func:`round_trip` through redis-py's pipeline."""
    async with redis.pipeline(transaction=False) as pipe:
        for command in commands:
            pipe.execute_command(*command)
        replies: list[Any] = await pipe.execute()
    return replies
