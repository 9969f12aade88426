"""The chaos benchmark's faults: the Caravel services as processes of their own, a Redis of
its own (one server with AOF, or the local 3+3 cluster of ``tests/cluster.py``), and the
killer that ``kill -9``s them at random and starts them again.

Every process is started here and stopped here (:meth:`Services.stop`,
:meth:`SingleRedis.stop`, ``LocalCluster.stop``), also when the run fails: the shared Redis
is never touched.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from redis.crc import key_slot

from services.children import terminate
from shared.bus import Keys
from tests.cluster import LocalCluster, _free_ports

# How many processes of each service run; the one HTTP port is shared by the lobbies.
INSTANCES = {"engine": 2, "lobby": 2, "ai": 2, "scoring": 1}
SERVICE_KINDS = tuple(INSTANCES)
SINGLE_KINDS = ("redis",)
CLUSTER_KINDS = ("master", "replica")
WAIT_READY_S = 0.2  # how often the killer looks again for the kind whose turn it is
# A process not serving this long after its start failed its drill: generous, as 7 processes
# of 2 CPU seconds each start at once on a machine other work may load 15 times over.
START_S = 300.0
PORT_TAKEN = b"metrics port taken"  # services/server.py's warning: no probes on that port
LOOP_DIED = b"a service loop died"  # services/cli.py's last line of a process whose loop died
LIVEZ_EVERY_S = 2.0  # how often every process's /livez is asked (a few GETs each time)


@dataclass
class Services:
    """The services, each instance a ``caravel <service>`` process with its stderr in the
    run's folder."""

    env: dict[str, str]
    folder: Path
    processes: dict[tuple[str, int], subprocess.Popen[bytes]] = field(default_factory=dict)
    starts: Counter[str] = field(default_factory=Counter)
    launched: Counter[tuple[str, int]] = field(default_factory=Counter)
    ports: dict[tuple[str, int], int] = field(default_factory=dict)  # metrics, not lobbies
    log_at: dict[tuple[str, int], int] = field(default_factory=dict)  # its log's size at start
    # Processes whose service loop died (a 503 from /livez, or an exit naming the loop), each
    # as "kind-i#start" (one entry per process, however often it is seen) → what it said.
    dead: dict[str, str] = field(default_factory=dict)

    def start_all(self) -> None:
        for kind, count in INSTANCES.items():
            for i in range(count):
                self.start(kind, i)

    def start(self, kind: str, i: int) -> None:
        env = dict(self.env)
        if kind != "lobby":
            env["CARAVEL_METRICS_PORT"] = str(self.port(kind, i))
        self.starts[kind] += 1
        self.launched[kind, i] += 1
        log = (self.folder / f"{kind}-{i}.log").open("ab")
        self.log_at[kind, i] = log.tell()
        command = [sys.executable, "-m", "services.cli", kind]
        self.processes[kind, i] = subprocess.Popen(command, env=env, stdout=log, stderr=log)
        log.close()

    def port(self, kind: str, i: int) -> int:
        """The instance's metrics and probe port, the same for each of its processes."""
        return self.ports.setdefault((kind, i), _free_ports(1)[0])

    def kill(self, kind: str) -> int:
        """``kill -9`` one instance of ``kind`` (at random); its index."""
        i = random.randrange(INSTANCES[kind])
        process = self.processes[kind, i]
        self.check_exit(kind, i)  # one that ended by itself is not hidden by this kill
        process.send_signal(signal.SIGKILL)
        process.wait()
        return i

    async def started(self, kind: str, i: int, timeout_s: float = START_S) -> None:
        """Until the instance serves: its ``/livez`` answers (a lobby, on the port all
        lobbies share: until its log says it serves)."""
        give_up = time.monotonic() + timeout_s
        async with httpx.AsyncClient(timeout=2) as client:
            while time.monotonic() < give_up:
                if self.processes[kind, i].poll() is not None:
                    raise RuntimeError(f"{kind}-{i} exited {self.processes[kind, i].returncode}")
                if PORT_TAKEN in self._log_since_start(kind, i):  # it will never serve there
                    raise RuntimeError(
                        f"{kind}-{i} found its port {self.ports.get((kind, i))} taken"
                    )
                if kind == "lobby":
                    if self._served(kind, i) >= self.launched[kind, i]:
                        return
                else:
                    with contextlib.suppress(httpx.HTTPError):
                        url = f"http://127.0.0.1:{self.ports[kind, i]}/livez"
                        if (await client.get(url)).status_code == 200:
                            return
                await asyncio.sleep(0.25)
        raise TimeoutError(f"{kind}-{i} not serving {timeout_s} s after its start")

    def _served(self, kind: str, i: int) -> int:
        log = self.folder / f"{kind}-{i}.log"
        return log.read_bytes().count(b"Caravel serves") if log.exists() else 0

    def _log_since_start(self, kind: str, i: int) -> bytes:
        """What the instance's current process has logged."""
        with (self.folder / f"{kind}-{i}.log").open("rb") as log:
            log.seek(self.log_at[kind, i])
            return log.read()

    def check_exit(self, kind: str, i: int) -> None:
        """Count the instance's process among the dead loops if it exited though not killed:
        since issue 25 a process whose service loop died exits 1 naming it, and a killer
        that killed and restarted that instance later hid it (only the run's end looked)."""
        code = self.processes[kind, i].poll()
        if code is None or code == -signal.SIGKILL:
            return
        said = [line for line in self._log_since_start(kind, i).splitlines() if LOOP_DIED in line]
        loops = _loops_named(said[-1]) if said else f"exited {code} without a kill"
        self.dead.setdefault(f"{kind}-{i}#{self.launched[kind, i]}", loops)

    async def probe(self, client: httpx.AsyncClient, lobbies: str) -> None:
        """One look at every process: its exit (:meth:`check_exit`), and its ``/livez``
        (a 503 names the loops that died; a refusal or timeout is a process killed or still
        starting: the drills see those). The lobbies share one port: ``lobbies`` (their
        base URL) answers for one of them."""
        for kind, i in list(self.processes):
            self.check_exit(kind, i)
        targets = {
            f"{kind}-{i}#{self.launched[kind, i]}": f"http://127.0.0.1:{port}/livez"
            for (kind, i), port in self.ports.items()
            if self.processes[kind, i].poll() is None
        }
        targets["lobby (shared port)"] = f"{lobbies}/livez"
        answers = await asyncio.gather(*(_livez(client, url) for url in targets.values()))
        for name, said in zip(targets, answers, strict=True):
            if said is not None:
                self.dead.setdefault(name, said)

    async def watch(self, lobbies: str, stop: asyncio.Event) -> None:
        """:meth:`probe` every ``LIVEZ_EVERY_S`` until ``stop``, and once more then: a
        process whose loop died lived on before (issue 25), and the drills asked its
        ``/livez`` only until it first served."""
        async with httpx.AsyncClient(timeout=2) as client:
            while not stop.is_set():
                await self.probe(client, lobbies)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), LIVEZ_EVERY_S)
            await self.probe(client, lobbies)

    def alive(self) -> bool:
        return all(p.poll() is None for p in self.processes.values())

    def stop(self, kinds: tuple[str, ...] = SERVICE_KINDS) -> None:
        """SIGTERM, then SIGKILL after 20 s."""
        terminate([p for (k, _), p in self.processes.items() if k in kinds], 20)


async def _livez(client: httpx.AsyncClient, url: str) -> str | None:
    """What a ``/livez`` that answers 503 says (None: 200, or no answer)."""
    try:
        answer = await client.get(url)
    except httpx.HTTPError:
        return None
    if answer.status_code != 503:
        return None
    with contextlib.suppress(ValueError):
        return str(answer.json().get("message", answer.text))
    return answer.text


def _loops_named(line: bytes) -> str:
    """The loops a process's last log line names (``services/cli.py``: JSON, ``loops``)."""
    with contextlib.suppress(ValueError, AttributeError):
        return str(json.loads(line).get("loops", line.decode(errors="replace")))
    return line.decode(errors="replace")


@dataclass
class SingleRedis:
    """One ``redis-server`` with AOF. With ``everysec`` a write usually reaches the file
    (the OS's cache) before its reply, but while a background fsync runs Redis holds its
    writes back for up to 2 s and answers all the same, so a ``kill -9`` then loses what it
    acknowledged (seen at stop 44: a log that went back, a table's game gone). ``always``
    writes and syncs before every reply."""

    server: str
    folder: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="caravel-chaos-")))
    port: int = 0
    process: subprocess.Popen[bytes] | None = None
    appendfsync: str = "everysec"

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> SingleRedis:
        self.port = self.port or _free_ports(1)[0]
        args = [self.server, "--port", str(self.port), "--bind", "127.0.0.1"]
        args += ["--dir", str(self.folder), "--save", "", "--appendonly", "yes"]
        args += ["--appendfsync", self.appendfsync, "--logfile", str(self.folder / "redis.log")]
        self.process = subprocess.Popen(args, stdout=subprocess.DEVNULL)
        return self

    def kill(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        self.process.wait()

    def stop(self, keep: Path | None = None) -> None:
        """Stop the server and delete its files; ``keep``: copy its data there first (a
        drill's logs: a stuck game's streams and keys, read with a ``redis-server`` on it)."""
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if keep is not None:
            shutil.copytree(self.folder, keep, dirs_exist_ok=True)
        shutil.rmtree(self.folder, ignore_errors=True)


@dataclass(frozen=True)
class Kill:
    kind: str
    at: float  # time.time(), as the events' recorded_at
    shard: int | None = None  # the cluster shard hit (master and replica kills)
    note: str = ""


def shard_ranges(cluster: LocalCluster) -> list[int]:
    """The first slot of each shard's range, in order (the shards never reshard here)."""
    out = cluster._cli(cluster.live_ports()[0], "CLUSTER", "NODES")
    starts = [int(p.split("-")[0]) for line in out.splitlines() for p in line.split()[8:]]
    return sorted(starts)


def shard_of_slot(starts: list[int], slot: int) -> int:
    return max(i for i, first in enumerate(starts) if first <= slot)


def shard_of_game(starts: list[int], keys: Keys, game: str) -> int:
    return shard_of_slot(starts, key_slot(keys.meta(game).encode()))


def _nodes(cluster: LocalCluster) -> list[list[str]]:
    out = cluster._cli(cluster.live_ports()[0], "CLUSTER", "NODES")
    return [line.split() for line in out.splitlines() if line.strip()]


def _port(parts: list[str]) -> int:
    return int(parts[1].split("@")[0].rsplit(":", 1)[1])


def pick_node(cluster: LocalCluster, role: str, starts: list[int]) -> tuple[int, int] | None:
    """A live master (or replica) at random, and the shard it serves."""
    nodes = _nodes(cluster)
    by_id = {parts[0]: parts for parts in nodes}
    live = set(cluster.live_ports())
    found = []
    for parts in nodes:
        if "fail" in parts[2] or _port(parts) not in live:
            continue
        owner = parts if role == "master" else by_id.get(parts[3])
        if role not in parts[2] and not (role == "replica" and "slave" in parts[2]):
            continue
        if owner is None or len(owner) <= 8:
            continue
        found.append((_port(parts), shard_of_slot(starts, int(owner[8].split("-")[0]))))
    return random.choice(found) if found else None


class Killer:
    """Kills at random every ``interval_s`` (on average): each time a kind killed least so
    far, waiting for one of them to be ready (a killed service is started again after a
    short pause and killed again once it serves, a Redis node once the one before is back
    and healthy), so every kind is killed as often, give or take one."""

    def __init__(
        self,
        kinds: list[str],
        services: Services,
        redis: SingleRedis | None,
        cluster: LocalCluster | None,
        interval_s: float,
        recover_s: float = 8.0,
        quiet_s: float = 0.0,
    ) -> None:
        self.kinds = kinds
        self.services = services
        self.redis = redis
        self.cluster = cluster
        self.interval_s = interval_s
        self.recover_s = recover_s  # a service kind is killed again this long after its start
        # No Redis kill this long after a Redis fault ends (its cluster healthy): the other
        # shards' rate has quiet seconds to be compared with (``shard_figures``). Without
        # it the next Redis kill comes within 0.2 s of the last one's end whenever a
        # fault lasts longer than the interval (a master's, ~5 s, at --interval 4).
        self.quiet_s = quiet_s
        self.kills: list[Kill] = []
        self.busy: set[str] = set()
        self.errors: list[str] = []
        # Redis kinds: kill until healthy again; services: start until serving
        self.recoveries: dict[str, list[float]] = {}
        self.starts = shard_ranges(cluster) if cluster else []
        self.tasks: set[asyncio.Task[None]] = set()
        # Each cluster node kill's phases, s after the kill (time.time() of the kill as "at"):
        # its slots served by another node ("failover", masters), every node healthy again.
        self.phases: list[dict[str, Any]] = []

    def counts(self) -> Counter[str]:
        return Counter(k.kind for k in self.kills)

    async def run(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            kind = self._next()
            pause = self.interval_s * random.uniform(0.5, 1.5) if kind else WAIT_READY_S
            if kind is not None:
                self.busy.add(kind)
                task = asyncio.create_task(self._kill(kind))
                self.tasks.add(task)
                task.add_done_callback(self.tasks.discard)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), pause)
        await asyncio.gather(*self.tasks, return_exceptions=True)

    def _next(self) -> str | None:
        """A kind killed least so far, at random among them, once one of them is ready (None:
        wait). Round-robin rather than any ready kind: a Redis is back in a second, a service
        on a loaded machine in tens, and picking whatever is ready killed Redis ten times as
        often as each service."""
        counts = self.counts()
        fewest = min(counts[k] for k in self.kinds)
        ready = [
            k
            for k in self.kinds
            if counts[k] == fewest and k not in self.busy and not self._redis_busy(k)
        ]
        return random.choice(ready) if ready else None

    def _redis_busy(self, kind: str) -> bool:
        """One Redis fault at a time (a second master killed before the first shard has its
        replica back would leave a shard with no one to fail over to)."""
        return kind in (*SINGLE_KINDS, *CLUSTER_KINDS) and bool(
            self.busy & {*SINGLE_KINDS, *CLUSTER_KINDS}
        )

    async def _kill(self, kind: str) -> None:
        try:
            if kind in SERVICE_KINDS:
                await self._kill_service(kind)
            elif kind == "redis":
                await self._kill_single()
            else:
                await self._kill_node(kind)
        except Exception as e:  # a drill that failed is reported, the run goes on
            self.errors.append(f"{kind}: {type(e).__name__}: {e}")
        finally:
            self.busy.discard(kind)

    async def _kill_service(self, kind: str) -> None:
        i = self.services.kill(kind)
        self.kills.append(Kill(kind, time.time()))
        await asyncio.sleep(random.uniform(0.2, 1.0))
        self.services.start(kind, i)
        started = time.monotonic()
        await self.services.started(kind, i)
        self.recoveries.setdefault(kind, []).append(time.monotonic() - started)
        await asyncio.sleep(self.recover_s)  # let it work before this kind is killed again

    async def _kill_single(self) -> None:
        assert self.redis is not None
        self.redis.kill()
        killed = time.monotonic()
        self.kills.append(Kill("redis", time.time()))
        await asyncio.sleep(random.uniform(0.2, 1.0))
        self.redis.start()
        await until_ping(self.redis.url)
        self.recoveries.setdefault("redis", []).append(time.monotonic() - killed)

    async def _kill_node(self, role: str) -> None:
        cluster = self.cluster
        assert cluster is not None
        picked = await asyncio.to_thread(pick_node, cluster, role, self.starts)
        if picked is None:
            raise RuntimeError(f"no live {role} to kill")
        port, shard = picked
        cluster.kill(port)
        killed = time.monotonic()
        self.kills.append(Kill(role, time.time(), shard, str(port)))
        phases: dict[str, Any] = {"kind": role, "shard": shard, "at": self.kills[-1].at}
        self.phases.append(phases)
        if role == "master":  # its replica takes over first; then the node comes back
            await asyncio.to_thread(cluster.wait_failover, port)
            phases["failover_s"] = round(time.monotonic() - killed, 2)
        else:
            await asyncio.sleep(random.uniform(0.2, 1.0))
        cluster.restart(port)
        phases["restarted_s"] = round(time.monotonic() - killed, 2)
        await asyncio.to_thread(cluster.wait_healthy)
        phases["healthy_s"] = round(time.monotonic() - killed, 2)
        self.recoveries.setdefault(role, []).append(time.monotonic() - killed)
        await asyncio.sleep(self.quiet_s)  # still busy: no other Redis kill meanwhile


async def until_ping(url: str, timeout_s: float = 60) -> None:
    from shared.bus import connect

    give_up = time.monotonic() + timeout_s
    while time.monotonic() < give_up:
        client: Any = connect(url, retry=None)
        try:
            await client.ping()
            return
        except Exception:
            await asyncio.sleep(0.05)
        finally:
            await client.aclose()
    raise TimeoutError(f"no Redis at {url} after {timeout_s} s")
