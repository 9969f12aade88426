"""Limits that keep one client from taking a lobby for itself: request body size, requests
per client (joins, commands, WebSockets) and open WebSockets per client and in all.

A client is its IP address (as uvicorn reports it). Rates are token buckets kept in Redis,
so every lobby replica draws on the same bucket; a bucket costs one script call, one round
trip, and expires once full again. Open sockets are counted per process: a socket lives in
the process that holds it.

Refusals take the API's one error shape: 413 ``payload_too_large`` and 429 ``rate_limited``
with ``Retry-After``.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections import Counter
from collections.abc import Awaitable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from typing import Any, TypeVar

import structlog
from fastapi import FastAPI
from fastapi.responses import JSONResponse
from redis.asyncio import Redis
from redis.exceptions import TimeoutError as RedisTimeoutError
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from shared.bus import Keys
from shared.bus.admission import SCRIPTS
from shared.bus.faults import transient
from shared.bus.scripts import Script, call
from shared.httpapi import ErrorOut
from shared.loops import Sparse
from shared.settings import Settings

log = structlog.get_logger("caravel.limits")
T = TypeVar("T")

# The longest a request waits for its client's bucket (a move: past its seat's check). A
# bucket lies on the shard its client's key hashes to, not on the request's game's: with
# that shard's node hung or gone without a word (a host lost: no reset comes, so a read
# waits for the socket timeout, 15 s, and a connect for 2 s), every request of the
# client, whatever its game's shard, waited for it. Past this, the request goes through
# unchecked, as when Redis refuses (:meth:`Limits.unchecked`).
BUCKET_WAIT_S = 0.5
# A bucket whose call failed or went unanswered is not asked again for this long: the
# requests of its clients meanwhile go through unchecked at once, not each after its own
# wait (a hung node is failed over after the node timeout, seconds).
BUCKET_PAUSE_S = 1.0
PAUSED_KEPT = 1024  # paused buckets kept before the expired ones are dropped
# A lobby whose Redis does not answer logs its requests let through unchecked at most this
# often, with their count: one line per bucket and request was 454 lines in a 3,000-table
# run whose Redis pool was full (benchmarks/README.md, `cap12`).
UNCHECKED_LOG_S = 5.0


class Refused(Exception):
    """A request or socket refused by a limit: the status (or close code), the error code
    and the message; ``retry_after_s`` for a rate."""

    def __init__(
        self, status: int, code: str, message: str, retry_after_s: int | None = None
    ) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message
        self.retry_after_s = retry_after_s

    def response(self) -> JSONResponse:
        headers = {} if self.retry_after_s is None else {"Retry-After": str(self.retry_after_s)}
        details = {} if self.retry_after_s is None else {"retry_after_s": self.retry_after_s}
        body = ErrorOut(code=self.code, message=self.message, details=details)
        return JSONResponse(body.model_dump(), status_code=self.status, headers=headers)


@dataclass(frozen=True)
class Rate:
    per_second: float
    burst: int


def client_of(scope: Scope) -> str:
    """The client's address (uvicorn takes it from X-Forwarded-For behind a trusted proxy)."""
    client = scope.get("client")
    return str(client[0]) if client else "unknown"


class Limits:
    """The lobby's limits: rates per client in Redis, open sockets in this process."""

    def __init__(self, redis: Redis, keys: Keys, settings: Settings) -> None:
        self.redis = redis
        self.keys = keys
        self.settings = settings
        self.rates = {
            "joins": Rate(settings.join_rate, settings.join_burst),
            "commands": Rate(settings.command_rate, settings.command_burst),
            "sockets": Rate(settings.socket_rate, settings.socket_burst),
        }
        self.sockets: Counter[str] = Counter()
        self._paused: dict[str, float] = {}  # bucket key -> not asked until (monotonic)
        self._unchecked = Sparse(UNCHECKED_LOG_S)

    async def take(self, kind: str, client: str) -> None:
        """Take one of ``client``'s ``kind`` tokens; :class:`Refused` (429) if none is left.
        If Redis does not answer (or fails over, or lacks replicas: any transient fault of
        ``shared.bus.faults``), the request goes through: the limit must not become an
        outage of its own (the request then meets Redis's 503 anyway)."""
        bucket = self.bucket(kind, client)
        paused = self.paused(bucket)
        wait = 0.0 if paused else await self.bucket_wait(bucket, call(self.redis, *bucket))
        self.check(kind, client, wait)

    def paused(self, bucket: tuple[Script, list[str], list[float]]) -> bool:
        """Whether ``bucket`` is not asked now: its call failed or went unanswered less
        than :data:`BUCKET_PAUSE_S` ago (its requests go through unchecked meanwhile)."""
        until = self._paused.get(bucket[1][0])
        return until is not None and time.monotonic() < until

    async def bucket_wait(
        self, bucket: tuple[Script, list[str], list[float]], sent: Awaitable[Any]
    ) -> Any:
        """The reply of ``bucket``'s call (``sent``), waited for :func:`bounded`; if it
        fails (a transient fault) or does not come in time, no wait (the request goes
        through unchecked) and the bucket is :meth:`paused` for :data:`BUCKET_PAUSE_S`."""
        try:
            return await bounded(sent)
        except Exception as e:
            wait = self.unchecked(e)
        now = time.monotonic()
        if len(self._paused) >= PAUSED_KEPT:
            self._paused = {k: t for k, t in self._paused.items() if t > now}
        self._paused[bucket[1][0]] = now + BUCKET_PAUSE_S
        return wait

    def unchecked(self, error: Exception) -> float:
        """No wait for a bucket whose call met a transient fault (re-raised if it is not
        one): the request goes through, as :meth:`take` says. Logged at most once every
        :data:`UNCHECKED_LOG_S`, with the count of requests let through since the last
        line (:class:`~shared.loops.Sparse`)."""
        if not transient(error):
            raise error
        unchecked = self._unchecked.due()
        if unchecked:
            log.warning(
                "rate limits not checked: redis does not answer",
                unchecked=unchecked,
                error=str(error),
            )
        return 0.0

    def bucket(self, kind: str, client: str) -> tuple[Script, list[str], list[float]]:
        """The script call that takes one of ``client``'s ``kind`` tokens (its reply: the
        seconds to wait, for :meth:`check`), to send in a batch with other calls."""
        rate = self.rates[kind]
        key = f"{self.keys.prefix}:rate:{kind}:{client}"
        return SCRIPTS["take"], [key], [rate.per_second, rate.burst]

    def check(self, kind: str, client: str, wait: bytes | str | float) -> None:
        """:class:`Refused` (429, with the seconds to retry in) if the :meth:`bucket` call
        answered a ``wait``: no token was left."""
        seconds = float(wait)
        if seconds > 0:
            retry = max(1, math.ceil(seconds))
            message = f"too many {kind} from {client}; retry in {retry} s"
            raise Refused(429, "rate_limited", message, retry)

    @contextmanager
    def socket_slot(self, client: str) -> Iterator[None]:
        """Hold one of the process's open sockets for ``client`` while in the block;
        :class:`Refused` if the client, or the lobby, holds as many as it may."""
        if self.sockets[client] >= self.settings.ws_max_per_client:
            raise Refused(4429, "too_many_sockets", "too many open sockets from this client")
        if self.sockets.total() >= self.settings.ws_max_total:
            raise Refused(4503, "too_many_sockets", "the lobby holds all the sockets it may")
        self.sockets[client] += 1
        try:
            yield
        finally:
            self.sockets[client] -= 1
            if not self.sockets[client]:
                del self.sockets[client]


async def bounded(pending: Awaitable[T]) -> T:
    """``pending``'s result (a bucket's call), if it comes within :data:`BUCKET_WAIT_S`;
    else a Redis timeout (a transient fault: the request goes through unchecked), the call
    left to end in the background (cancelled, its connection would be closed under it)."""
    task = asyncio.ensure_future(pending)
    try:
        await asyncio.wait([task], timeout=BUCKET_WAIT_S)
    finally:
        if not task.done():
            task.add_done_callback(forget)
    if not task.done():
        raise RedisTimeoutError(f"the rate bucket did not answer within {BUCKET_WAIT_S} s")
    return task.result()


def forget(task: asyncio.Future[Any]) -> None:
    """A bucket's call no one waits for any more: its outcome is dropped (retrieved, so
    asyncio does not log it as never retrieved)."""
    if not task.cancelled():
        task.exception()


def rate_kind(method: str, path: str) -> str | None:
    """Which rate a request draws on here: joins (a table made or joined, a queue ticket),
    or none. A command's (``POST /games/{id}/commands``) is taken by its route, in the
    round trip that checks its seat and sends it (``games.Admission``), before anything
    else is checked but its token's signature; a request refused for its token draws on it
    there too."""
    if method != "POST":
        return None
    parts = path.strip("/").split("/")
    if parts in (["tables"], ["queue"]) or (len(parts) == 3 and parts[::2] == ["tables", "join"]):
        return "joins"
    return None


class _TooLarge(Exception):
    pass


class LimitsMiddleware:
    """HTTP requests: a body larger than ``CARAVEL_MAX_BODY_BYTES`` gets 413 (from its
    Content-Length before it is read, or as soon as a chunked body passes the limit), and a
    client out of tokens gets 429; neither reaches the routes, so nothing changes."""

    def __init__(self, app: ASGIApp, limits: Limits) -> None:
        self.app = app
        self.limits = limits

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        try:
            self._check_length(scope)
            kind = rate_kind(scope["method"], scope["path"])
            if kind is not None:
                await self.limits.take(kind, client_of(scope))
        except Refused as refused:
            await refused.response()(scope, receive, send)
            return
        await self._bounded(scope, receive, send)

    def _check_length(self, scope: Scope) -> None:
        for name, value in scope["headers"]:
            if name == b"content-length" and value.isdigit() and int(value) > self._max:
                raise self._too_large()

    @property
    def _max(self) -> int:
        return self.limits.settings.max_body_bytes

    def _too_large(self) -> Refused:
        return Refused(413, "payload_too_large", f"a request body is {self._max} bytes at most")

    async def _bounded(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Run the app with a body cut off at the limit: past it, the app's answer (routes
        turn a failed read into a 400) is replaced by the 413."""
        seen = 0
        over = False
        started = False

        async def bounded_receive() -> Message:
            nonlocal seen, over
            message = await receive()
            seen += len(message.get("body", b""))
            if seen > self._max:
                over = True
                raise _TooLarge
            return message

        async def guarded_send(message: Message) -> None:
            nonlocal started
            if over and not started:
                return  # the app's answer to a body it could not read: the 413 replaces it
            started = started or message["type"] == "http.response.start"
            await send(message)

        with suppress(_TooLarge):  # not caught by the app: it stopped at the read
            await self.app(scope, bounded_receive, guarded_send)
        if over and not started:
            await self._too_large().response()(scope, receive, send)


def install(app: FastAPI, redis: Redis, keys: Keys, settings: Settings) -> Limits:
    """Put the limits on ``app`` (``app.state.limits``, used by the WebSocket route)."""
    limits = Limits(redis, keys, settings)
    app.state.limits = limits
    app.add_middleware(LimitsMiddleware, limits=limits)
    return limits
