"""Service loops that outlive errors: the one way every Caravel loop retries.

A loop that lets an exception escape ends its task for good while the process looks alive,
so every service loop runs its rounds through :func:`keep_running`: a failed round is logged
with its traceback, the service drops what it can no longer trust (``on_error``), waits a
delay that doubles with each consecutive failure up to a cap (so a Redis that is away is not
hammered, and one that is back is used again within the cap), and tries again. Only a stop
ends the loop, so a task that ended with an exception is one that never got going: health
checks report it (``services/health.py``) and the orchestrator restarts the process.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, TypeVar

T = TypeVar("T")

FIRST_DELAY_S = 0.05
MAX_DELAY_S = 2.0


class Backoff:
    """Delays after consecutive failures: ``first_s``, doubling, capped at ``cap_s``; a
    success starts again from ``first_s``."""

    def __init__(self, first_s: float = FIRST_DELAY_S, cap_s: float = MAX_DELAY_S) -> None:
        self.first_s = first_s
        self.cap_s = cap_s
        self.failures = 0

    def next_delay(self) -> float:
        """Count one more failure; returns how long to wait before the next attempt."""
        self.failures += 1
        return float(min(self.cap_s, self.first_s * 2 ** min(self.failures - 1, 32)))

    def reset(self) -> None:
        self.failures = 0


async def wait_or_stop(stop: asyncio.Event, seconds: float) -> None:
    """Sleep ``seconds``, or less if ``stop`` is set meanwhile (a stop is never held up)."""
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stop.wait(), seconds)


async def keep_running(
    stop: asyncio.Event,
    round_: Callable[[], Awaitable[Any]],
    log: Any,
    failure: str,
    *,
    period_s: float = 0.0,
    on_error: Callable[[], None] | None = None,
    backoff: Backoff | None = None,
) -> None:
    """Run ``round_`` until ``stop`` is set, ``period_s`` apart (0: at once again).

    A round that raises is logged as every run of failures is (:func:`logged_failure`:
    the first with its traceback, then the 2nd, 4th, 8th... as one line), ``on_error``
    drops the caller's untrusted caches, and the next round comes after a backoff delay."""
    backoff = backoff or Backoff()
    while not stop.is_set():
        try:
            await round_()
        except Exception as e:
            delay = backoff.next_delay()
            _log_failed_round(log, failure, e, delay, backoff.failures)
            if on_error is not None:
                on_error()
            await wait_or_stop(stop, delay)
            continue
        backoff.reset()
        if period_s > 0:
            await wait_or_stop(stop, period_s)


def _log_failed_round(
    log: Any, failure: str, error: Exception, delay: float, failures: int
) -> None:
    """A failed round's line, if :func:`logged_failure` says so: a round every 2 s
    against a Redis or a shard away logged its traceback 1,800 times an hour."""
    if failures == 1:
        log.exception(failure, retry_in_s=delay, failures=failures)
    elif logged_failure(failures):
        log.warning(failure, retry_in_s=delay, failures=failures, error=repr(error))


async def each(
    items: Iterable[T], step: Callable[[T], Awaitable[Any]], log: Any, failure: str
) -> None:
    """Run ``step`` on every item, one after the other, even when some fail: a loop that
    walks all partitions keeps one partition's fault (its shard refusing writes, say) to
    that partition. A failure is logged with its item (:func:`log_fault`); once every
    item had its turn, the first failure is raised, for the loop's backoff."""
    first: Exception | None = None
    for item in items:
        try:
            await step(item)
        except Exception as e:
            log_fault(log, failure, e, item=item)
            first = first or e
    if first is not None:
        raise first


class Sparse:
    """A line about something that can happen many times a second (a fault met by every
    request, every loop's step) logged at most once every ``seconds`` in a process, with
    how many times it happened since the line before."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.last = -math.inf  # when the last line was due (monotonic)
        self.since = 0  # happened since then, unlogged

    def due(self) -> int:
        """Count one more time it happened: if a line is due now (the first, or
        ``seconds`` after the last), how many times it happened since the last line, this
        one included (counting starts again); else 0, and no line."""
        self.since += 1
        now = time.monotonic()
        if now - self.last < self.seconds:
            return 0
        self.last, happened, self.since = now, self.since, 0
        return happened


TRACEBACK_EVERY_S = 10.0  # a process logs one traceback of a kind of fault this often


_tracebacks: dict[type[BaseException], Sparse] = {}  # a kind of fault -> its tracebacks


def traceback_due(error: BaseException) -> bool:
    """Whether ``error``'s first line of a run of failures carries its traceback: one of a
    kind of fault (its exception's type) every :data:`TRACEBACK_EVERY_S` in a process, the
    others its ``repr`` alone. A master's kill fails the reads of every subscriber of its
    shard at once (a lobby or a bot process follows a few dozen streams there): the same
    traceback was formatted for each, a tenth of a second of the process's CPU on a loaded
    machine while the healthy shards' requests waited (issue 25)."""
    kind = type(error)
    sparse = _tracebacks.get(kind)
    if sparse is None:
        sparse = _tracebacks[kind] = Sparse(TRACEBACK_EVERY_S)
    return sparse.due() > 0


def log_fault(log: Any, message: str, error: BaseException, **fields: Any) -> None:
    """Log ``error`` (being handled) under ``message``: with its traceback if
    :func:`traceback_due`, else as a warning with its ``repr``. A master's kill fails a
    loop's step for every partition of its shard at once: the bot player's reclaim logged
    "stream not reclaimed" with its traceback 648 times in a two-minute drill of ten kills,
    2.5% of its CPU, all of it in the seconds the other shards' games waited on it
    (benchmarks/README.md, `failover10`)."""
    if traceback_due(error):
        log.exception(message, **fields)
    else:
        log.warning(message, error=repr(error), **fields)


def logged_failure(failures: int) -> bool:
    """Whether the ``failures``-th failure in a row of something retried gets a log line:
    the 1st (its caller logs it with the traceback), then the 2nd, 4th, 8th... (one line
    with the count), the others none. A fault that lasts (a shard away, a failover) costs
    a line per doubling of its run, not one per try: a bot process following every
    partition formatted thousands of the same traceback a minute while a shard failed over
    (14 MB of log in 2 minutes of kills, the CPU taken from the other shards' games)."""
    return failures & (failures - 1) == 0
