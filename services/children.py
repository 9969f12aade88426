"""The child processes of `caravel up`: started on its Redis, data folder and port, told
apart in the merged logs, started again when they die, and stopped with it.

A child says it serves by writing to a pipe `caravel up` gives it
(``CARAVEL_CHILD_READY_FD``), so the parent's ``/readyz`` waits for every child without a
port of their own to poll (lobby children share the parent's).
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass, field
from typing import Any

import httpx
import structlog

from shared.loops import Backoff, wait_or_stop
from shared.settings import Settings

CHILD_STOP_S = 10  # a child given this long to stop before it is killed
WATCH_S = 0.2  # how often the children are looked at
STEADY_S = 10.0  # a child that ran this long before dying is started again at once
SCRAPE_TIMEOUT_S = 5.0  # a child's /metrics waited for this long by the parent's
PR_SET_PDEATHSIG = 1  # prctl(2): a signal the kernel sends when the parent dies


@dataclass
class Child:
    """One child: its name in the logs, the services it runs (``caravel part``), and its
    current process."""

    name: str
    services: str
    env: dict[str, str]
    process: subprocess.Popen[bytes] | None = None
    ready: bool = False
    metrics_port: int | None = None  # its operations routes, on 127.0.0.1
    starts: int = 0
    started_at: float = 0.0
    _pipe: int | None = None
    backoff: Backoff = field(default_factory=lambda: Backoff(first_s=0.5, cap_s=10.0))

    def start(self) -> None:
        """A new process, with the write end of a fresh readiness pipe."""
        read, write = os.pipe()
        os.set_blocking(read, False)
        env = {**self.env, "CARAVEL_CHILD_READY_FD": str(write), "CARAVEL_PROCESS_NAME": self.name}
        command = [sys.executable, "-m", "services.cli", "part", self.services]
        try:
            self.process = subprocess.Popen(
                command, env=env, stdout=subprocess.DEVNULL, pass_fds=(write,)
            )
        finally:
            os.close(write)
        self._close_pipe()
        self._pipe, self.ready, self.metrics_port = read, False, None
        self.starts += 1
        self.started_at = time.monotonic()

    def look(self) -> bool:
        """Note whether the child said it serves; False once its process has exited."""
        if self._pipe is not None and not self.ready:
            with contextlib.suppress(BlockingIOError):  # nothing said yet
                said = os.read(self._pipe, 16)
                self.ready = bool(said)
                self.metrics_port = int(said) if said.strip().isdigit() else None
        return self.process is not None and self.process.poll() is None

    def _close_pipe(self) -> None:
        if self._pipe is not None:
            os.close(self._pipe)
            self._pipe = None

    def signal(self, sig: int) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(sig)

    async def wait(self) -> None:
        """Until the process exits (killed after ``CHILD_STOP_S``)."""
        if self.process is None:
            return
        try:
            await asyncio.to_thread(self.process.wait, CHILD_STOP_S)
        except subprocess.TimeoutExpired:
            self.process.kill()
            await asyncio.to_thread(self.process.wait)
        self._close_pipe()


class Children:
    """The children of one `caravel up`, kept running until it stops."""

    def __init__(self, children: list[Child]) -> None:
        self.children = children
        self.log = structlog.get_logger("caravel")

    def problems(self) -> list[str]:
        """What keeps the children from serving, for the parent's ``/readyz``."""
        return [f"child {c.name} not ready" for c in self.children if not c.ready]

    async def metrics(self) -> dict[str, str]:
        """The Prometheus text of each child that serves, by name (those that do not answer
        within ``SCRAPE_TIMEOUT_S`` left out)."""
        ports = {c.name: c.metrics_port for c in self.children if c.ready and c.metrics_port}
        async with httpx.AsyncClient(timeout=SCRAPE_TIMEOUT_S) as client:
            answers = await asyncio.gather(
                *(client.get(f"http://127.0.0.1:{port}/metrics") for port in ports.values()),
                return_exceptions=True,
            )
        return {
            name: answer.text
            for name, answer in zip(ports, answers, strict=True)
            if isinstance(answer, httpx.Response) and answer.status_code == 200
        }

    async def watch(self, stop: asyncio.Event) -> None:
        """Start every child, then start again each one that exits, until ``stop``: at once
        after a child that ran ``STEADY_S``, else after a growing delay (one that cannot
        start is not restarted in a tight loop)."""
        for child in self.children:
            child.start()
        due: dict[str, float] = {}
        while not stop.is_set():
            now = time.monotonic()
            for child in self.children:
                if child.look():
                    continue
                if child.name not in due:
                    steady = now - child.started_at >= STEADY_S
                    if steady:
                        child.backoff.reset()
                    delay = 0.0 if steady else child.backoff.next_delay()
                    code = child.process.returncode if child.process else None
                    self.log.warning(
                        "child process exited: starting it again",
                        child=child.name,
                        exit_code=code,
                        restart_in_s=delay,
                    )
                    child.ready = False
                    due[child.name] = now + delay
                if now >= due[child.name]:
                    del due[child.name]
                    child.start()
            await wait_or_stop(stop, WATCH_S)

    async def stop(self) -> None:
        """SIGTERM to every child, then wait for each (killed if it takes too long)."""
        for child in self.children:
            child.signal(signal.SIGTERM)
        await asyncio.gather(*(child.wait() for child in self.children))


def terminate(
    processes: Iterable[subprocess.Popen[Any]], timeout_s: float = CHILD_STOP_S
) -> list[int]:
    """SIGTERM to each process still running, then wait for each, killing one still there
    ``timeout_s`` later: the one way every launcher here (benchmarks, tests, the capacity
    server) stops what it started. Their exit codes in order (a killed one's ``-9``), so a
    caller can check that a graceful stop was graceful."""
    chosen = list(processes)
    for process in chosen:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    for process in chosen:
        try:
            process.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    return [process.returncode for process in chosen]


def layout(processes: int) -> list[tuple[str, str]]:
    """The children (name, services) of a `caravel up` of ``processes`` processes: none for
    one; from two, a pipeline child with every service but the HTTP API, and a lobby child
    for each process beyond two (the parent serves the HTTP API)."""
    if processes < 2:
        return []
    lobbies = [(f"lobby-{n}", "lobby") for n in range(2, processes)]
    return [("pipeline", PIPELINE), *lobbies]


PIPELINE = "engine,ai,scoring,views"  # a pipeline child's services


def describe(processes: int) -> str:
    """The layout of a `caravel up` of ``processes`` processes, for a person."""
    if processes < 2:
        return "1 (every service in this one)"
    lobbies = f" + {processes - 2} lobby children on its port" if processes > 2 else ""
    return f"{processes} (HTTP API in this one{lobbies}; engine, bots, scoring, views in a child)"


@contextlib.asynccontextmanager
async def running_children(
    settings: Settings, redis_url: str, stop: asyncio.Event, spread: bool
) -> AsyncIterator[Children | None]:
    """The children of this `caravel up` if it ``spread``s its services (None: it runs
    alone), watched until the block ends, then stopped (before the Redis they use goes
    away)."""
    chosen = layout(settings.process_count()) if spread else []
    if not chosen:
        yield None
        return
    env = {
        **os.environ,
        "CARAVEL_REDIS_URL": redis_url,
        "CARAVEL_DATA_DIR": str(settings.data_dir.resolve()),
        "CARAVEL_HTTP_PORT": str(settings.http_port),
        "CARAVEL_HTTP_SHARE_PORT": "true",
        "CARAVEL_METRICS_PORT": "0",  # their metrics: through the parent's /metrics
        "CARAVEL_PROCESSES": "1",
    }
    children = Children([Child(name, services, env) for name, services in chosen])
    watching = asyncio.create_task(children.watch(stop), name="children")
    try:
        yield children
    finally:
        stop.set()
        await watching
        await children.stop()


def tell_parent(settings: Settings, metrics_port: int) -> None:
    """In a child of `caravel up`: say it serves, and the port of its operations routes on
    127.0.0.1 (the parent's readiness waits for it; its /metrics includes the child's)."""
    if settings.child_ready_fd is None:
        return
    with contextlib.suppress(OSError):
        os.write(settings.child_ready_fd, f"{metrics_port}\n".encode())
        os.close(settings.child_ready_fd)


def die_with_parent(settings: Settings) -> None:
    """In a child of `caravel up`: a SIGTERM from the kernel when the parent dies, even by
    SIGKILL (no orphan keeps serving its port or reading its streams). Linux only."""
    if settings.child_ready_fd is None or not sys.platform.startswith("linux"):
        return
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
