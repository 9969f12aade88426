"""Idempotency keys: a client that sends ``Idempotency-Key`` with a request that makes
something (a table, a seat, a queue ticket, a start) and sends it again (a double click, a
retry after a lost answer) gets the first request's answer, and nothing is made twice.

The first answer is kept in Redis under the client (its address, as the rate limits see it)
and the key, for ``IDEMPOTENCY_TTL_S``, in the partition of the table the request makes or
acts on (:meth:`~shared.bus.Keys.idempotency`): on a cluster, a keyed request waits on its
own game's shard only. A repeat that comes while the first still runs waits
for its answer (409 ``idempotency_pending`` with ``Retry-After`` if it takes longer than
``WAIT_S``). While it runs, its slot says so for ``PENDING_S`` at a time, renewed: a lobby
killed in the middle of a request (the chaos benchmark's kills) left the slot pending for
the whole ``IDEMPOTENCY_TTL_S``, and every repeat was 409 ``idempotency_pending`` for a day
(starts and tables never answered); now a repeat runs the request itself once the dead
one's slot has run out. A request that fails (5xx) while its slot's shard is away (its
master killed under it) frees the slot once the shard takes writes again, not when the slot
runs out: a repeat sent after the failover waited ~16 s for it (issue 25, the chaos drill).
The same key with another request (method, path or body) is refused: 422
``idempotency_key_reused`` (among the requests of one table: see
:meth:`IdempotencyMiddleware._partition`). A 5xx answer is not kept: the next repeat tries
again. Redis not answering is a 503 ``redis_unavailable`` with ``Retry-After``: the request
let through unguarded made a seat, a table or a ticket whose answer was then kept nowhere, and its
repeat made another (issue 25: a join whose repeat was refused ``name_taken`` under Redis
kills). An answer lost after all (a lobby killed once the request made its seat, or Redis
failing as it is kept) is answered again by the route itself where it can tell a repeat:
a create takes its table's id from the key (:func:`keyed_table_id`), a join its holder
(:func:`holder_of`), and a start answers a running table.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import re
import time
import uuid
from typing import Any

import structlog
from fastapi import FastAPI
from redis.asyncio import Redis
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from shared.bus import Keys
from shared.bus.connection import wait_or_remapped
from shared.bus.faults import transient
from shared.bus.scripts import call
from shared.contracts import dump_json, load_json
from shared.eventstore.scripts import LEASES
from shared.httpapi import RETRY_AFTER_S

from .limits import Refused, client_of

log = structlog.get_logger("caravel.idempotency")

HEADER = b"idempotency-key"
IDEMPOTENCY_TTL_S = 24 * 3600
WAIT_S = 30.0  # a repeat waits this long for the first request's answer
PENDING_S = 20.0  # a running request's slot lasts this long unless renewed (every third)
POLL_S = 0.05
FREE_RETRY_S = (0.05, 0.5)  # a slot not freed is tried again this soon, doubling up to the most
KEY_PATTERN = re.compile(r"^[\x21-\x7e]{1,128}$")  # printable ASCII, no spaces
KEPT_HEADERS = {b"content-type", b"location", b"retry-after"}


def holder_of(key: bytes, client: str, table_id: str, secret: bytes) -> str:
    """The seat holder a join sent with Idempotency-Key ``key`` by ``client`` takes: the
    same for its repeats, so a repeat whose first answer was lost finds the seat its first
    request took (and answers it again) instead of taking another or meeting ``name_taken``."""
    return _keyed_name(secret, b"join", client.encode(), table_id.encode(), key)[:32]


def keyed_table_id(key: bytes, client: str, secret: bytes) -> str:
    """The id of the table a ``POST /tables`` sent with Idempotency-Key ``key`` by ``client``
    makes: the same for its repeats, so a repeat whose first answer was lost finds the table
    its first request made (and answers it again) instead of making another; known before
    the table is made, so the key's record lives in that table's partition
    (:meth:`~shared.bus.Keys.idempotency`). The same form as an unkeyed table's random id."""
    return "t-" + _keyed_name(secret, b"table", client.encode(), key)[:12]


def _keyed_name(secret: bytes, *parts: bytes) -> str:
    """A name drawn from a keyed request's ``parts``: the same for its repeats, and keyed by
    the lobby's secret, so nobody else can name it (hex of an HMAC-SHA256)."""
    return hmac.new(secret, b"\0".join(parts), hashlib.sha256).hexdigest()


def guarded(method: str, path: str) -> bool:
    """The requests an Idempotency-Key applies to: POST /tables, /queue,
    /tables/{id}/join and /tables/{id}/start."""
    if method != "POST":
        return False
    parts = path.strip("/").split("/")
    return parts in (["tables"], ["queue"]) or (
        len(parts) == 3 and parts[0] == "tables" and parts[2] in ("join", "start")
    )


class IdempotencyMiddleware:
    """Answers a repeated ``Idempotency-Key`` with the first answer (see the module)."""

    def __init__(self, app: ASGIApp, redis: Redis, keys: Keys, secret: bytes) -> None:
        self.app = app
        self.redis = redis
        self.keys = keys
        self.secret = secret  # the lobby's: names a keyed create's table (:func:`keyed_table_id`)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        key = dict(scope["headers"]).get(HEADER) if scope["type"] == "http" else None
        if key is None or not guarded(scope["method"], scope["path"]):
            await self.app(scope, receive, send)
            return
        text = key.decode("latin-1")
        if not KEY_PATTERN.match(text):
            message = "an Idempotency-Key is 1 to 128 printable ASCII characters"
            await Refused(422, "bad_idempotency_key", message).response()(scope, receive, send)
            return
        body = await _read_body(receive)
        digest = hashlib.sha256(f"{scope['method']} {scope['path']} ".encode() + body).hexdigest()
        client = client_of(scope)
        slot = self.keys.idempotency(self._partition(scope["path"], client, key), client, text)
        pending = dump_json({"digest": digest, "run": uuid.uuid4().hex})  # this request's
        try:
            first = await self._first_answer(slot, digest, pending)
        except Refused as refused:
            await refused.response()(scope, receive, send)
            return
        except Exception as e:
            if not transient(e):  # a fault of the store: any other error is a bug
                raise
            log.warning("idempotency key not checked: redis does not answer", error=str(e))
            message = "the game store does not answer; retry shortly"
            await Refused(503, "redis_unavailable", message, RETRY_AFTER_S).response()(
                scope, receive, send
            )
            return
        if first is not None:
            await _send_kept(first, send)
            return
        await self._run_first(scope, replay(body, receive), send, slot, digest, pending)

    def _partition(self, path: str, client: str, key: bytes) -> int:
        """The partition a keyed request's record lives in: its table's (the one a join or
        start names; the one a create makes, :func:`keyed_table_id`), so that the request
        waits on no other shard than its game's. A queue ticket belongs to no game yet: it
        takes a create's, so a key used for both is seen reused. (A key reused for a join or
        a start of another table is not: its record is looked for in that table's partition.)"""
        parts = path.strip("/").split("/")
        if len(parts) == 3:  # /tables/{id}/join or /start (:func:`guarded`)
            return self.keys.partition(parts[1])
        return self.keys.partition(keyed_table_id(key, client, self.secret))

    async def _first_answer(self, slot: str, digest: str, pending: str) -> dict[str, Any] | None:
        """The kept answer of the first request with this key, after waiting for it if it
        runs; None when this request is the first (the slot is now taken for it, holding
        ``pending``)."""
        deadline = asyncio.get_running_loop().time() + WAIT_S
        while True:
            if await self.redis.set(slot, pending, nx=True, px=int(PENDING_S * 1000)):
                return None
            raw = await self.redis.get(slot)
            if raw is None:
                continue  # the first one failed (5xx) or expired just now: take the slot
            kept = load_json(raw)
            if kept["digest"] != digest:
                message = "this Idempotency-Key came with another request"
                raise Refused(422, "idempotency_key_reused", message)
            if "status" in kept:
                return kept  # type: ignore[no-any-return]
            if asyncio.get_running_loop().time() >= deadline:
                message = "the first request with this Idempotency-Key has not answered yet"
                raise Refused(409, "idempotency_pending", message, 1)
            await asyncio.sleep(POLL_S)

    async def _run_first(
        self, scope: Scope, receive: Receive, send: Send, slot: str, digest: str, pending: str
    ) -> None:
        """Run the request, pass its answer on and keep it (a 5xx or a crash frees the slot,
        which holds ``pending``)."""
        start: Message = {}
        chunks: list[bytes] = []

        async def keep(message: Message) -> None:
            nonlocal start
            if message["type"] == "http.response.start":
                start = message
            elif message["type"] == "http.response.body":
                chunks.append(message.get("body", b""))
            await send(message)

        renewing = asyncio.create_task(_renew(self.redis, slot))
        try:
            await self.app(scope, receive, keep)
        except BaseException:
            await _forget(self.redis, slot, pending)
            raise
        finally:
            renewing.cancel()
        status = int(start.get("status", 500))
        if status >= 500:
            await _forget(self.redis, slot, pending)
            return
        headers = [
            [k.decode("latin-1"), v.decode("latin-1")]
            for k, v in start.get("headers", [])
            if k.lower() in KEPT_HEADERS
        ]
        kept = {
            "digest": digest,
            "status": status,
            "headers": headers,
            "body": base64.b64encode(b"".join(chunks)).decode(),
        }
        try:
            await self.redis.set(slot, dump_json(kept), ex=IDEMPOTENCY_TTL_S)
        except Exception as e:
            if not transient(e):
                raise
            log.warning("idempotent answer not kept: redis does not answer", error=str(e))


async def _read_body(receive: Receive) -> bytes:
    """The whole request body (the limits middleware, outside this one, bounds it)."""
    chunks: list[bytes] = []
    while True:
        message = await receive()
        chunks.append(message.get("body", b""))
        if not message.get("more_body"):
            return b"".join(chunks)


def replay(body: bytes, receive: Receive) -> Receive:
    """A receive that gives the app the body read already, then the client's own messages
    (a disconnect)."""
    sent = False

    async def replayed() -> Message:
        nonlocal sent
        if sent:
            return await receive()
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    return replayed


async def _send_kept(kept: dict[str, Any], send: Send) -> None:
    headers = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in kept["headers"]]
    headers.append((b"idempotent-replayed", b"true"))
    body = base64.b64decode(kept["body"])
    headers.append((b"content-length", str(len(body)).encode()))
    await send({"type": "http.response.start", "status": kept["status"], "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def _renew(redis: Redis, slot: str) -> None:
    """Keep a running request's slot pending (until cancelled, when it answers)."""
    while True:
        await asyncio.sleep(PENDING_S / 3)
        try:
            await redis.pexpire(slot, int(PENDING_S * 1000))
        except Exception as e:
            if not transient(e):
                raise
            log.warning("idempotency slot not renewed, for now", error=str(e))


async def _forget(redis: Redis, slot: str, pending: str) -> None:
    """Free a failed request's ``slot`` (if it still holds its ``pending``); if its shard
    does not answer (the request most likely failed for that), free it again in the
    background until it answers (:func:`_forget_later`)."""
    try:
        await _free(redis, slot, pending)
    except Exception as e:
        if not transient(e):
            raise
        log.warning("idempotency slot not freed yet: freed once redis answers", error=str(e))
        task = asyncio.create_task(_forget_later(redis, slot, pending))
        _forgetting.add(task)
        task.add_done_callback(_forgetting.discard)


_forgetting: set[asyncio.Task[None]] = set()  # :func:`_forget_later` runs (kept referenced)


async def _forget_later(redis: Redis, slot: str, pending: str) -> None:
    """Free ``slot`` once its shard answers again, until the slot runs out by itself
    (``PENDING_S``): a repeat sent once a failover is over (the drill's clients send it
    again at once) runs the request then, instead of waiting for the slot to run out. A
    try that fails waits a little longer each time, or less when another master is found
    for some slots (:func:`wait_or_remapped`)."""
    give_up = time.monotonic() + PENDING_S
    pause, most = FREE_RETRY_S
    while time.monotonic() < give_up:
        await wait_or_remapped(pause)
        try:
            await _free(redis, slot, pending)
        except Exception as e:
            if not transient(e):
                log.exception("idempotency slot not freed: it expires")
                return
            pause = min(pause * 2, most)
        else:
            log.info("idempotency slot freed once redis answered")
            return


async def _free(redis: Redis, slot: str, pending: str) -> None:
    """Delete ``slot`` if it still holds ``pending``: the record of a repeat that took it
    (this one's ran out, or was lost in a failover) is the repeat's. An engine's lease is
    released the same way, by its holder only."""
    await call(redis, LEASES["release"], [slot], [pending])


def install(app: FastAPI, redis: Redis, keys: Keys, secret: bytes) -> None:
    """Honour Idempotency-Key on ``app`` (inside the limits: bodies are bounded first);
    ``secret``: the lobby's (:func:`keyed_table_id`)."""
    app.add_middleware(IdempotencyMiddleware, redis=redis, keys=keys, secret=secret)
