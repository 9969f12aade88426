"""The bot player: answers decision requests for bot seats, and for humans out of time.

It follows the partition decision streams through its own consumer group (several workers
share the load). For a bot seat it decides at once; for a seat whose player left, or whose
deadline passed without a move, a fallback bot decides and the command is recorded with
actor ``fallback``. A bot sees only its seat's projected view: never the game state.
Command ids are derived from (game, version, seat), so a redelivered request, or two workers
answering one, apply a move once.

A searching bot thinks for its budget (``bot_think_ms``) but never past the request's
deadline: it gets the time left less a safety margin, and answers with the best move found
by then. Searches run in threads, so one worker keeps serving other games meanwhile.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import random
import time
import uuid
from collections.abc import Sequence
from typing import Any

import structlog
from redis.asyncio import Redis
from structlog.contextvars import bound_contextvars

from services.lobby.views import read_view
from shared.bus import CommandSender, Delivery, GroupReader, Keys, ensure_group
from shared.contracts import CommandEnvelope, DecisionRequest
from shared.loops import keep_running
from shared.observability import metrics
from shared.settings import Settings

from .bots import bot

log = structlog.get_logger("caravel.ai")

GROUP = "ai"
FALLBACK_LEVEL = "greedy"
SAFETY_S = 0.1  # answer this long before a deadline: time to send, and one last iteration


class BotPlayer:
    def __init__(
        self, redis: Redis, keys: Keys, settings: Settings, consumer: str | None = None
    ) -> None:
        self.redis = redis
        self.keys = keys
        self.settings = settings
        self.sender = CommandSender(redis, keys)
        self.reader = GroupReader(
            redis, GROUP, consumer or f"ai-{uuid.uuid4().hex[:8]}", keys.dead_letters()
        )
        self.streams = [keys.decisions(p) for p in keys.all_partitions()]
        self.rng = random.Random()

    async def start(self) -> None:
        for stream in self.streams:
            await ensure_group(self.redis, stream, GROUP)

    async def run(self, stop: asyncio.Event) -> None:
        """Answer until ``stop``. Every ``CARAVEL_CLAIM_IDLE_MS`` / 2, first take over the
        requests another worker left pending that long (it died, or could not answer yet)."""
        await self.start()
        await keep_running(
            stop, self.serve_round, log, "bot player batch failed; its requests stay pending"
        )

    async def serve_round(self) -> None:
        """Answer one batch of requests, then play for the humans whose time ran out."""
        wait_ms = await self._wait_ms()
        await self.handle(
            await self.reader.next_batch(self.streams, 200, wait_ms, self.settings.claim_idle_ms)
        )
        await self.fire_deadlines()

    async def _wait_ms(self) -> int:
        """How long to wait for requests: until the next deadline, 100 ms at most."""
        nearest: Any = await self.redis.zrange(self.keys.deadlines(), 0, 0, withscores=True)
        if not nearest:
            return 100
        return int(min(100, max(1, (nearest[0][1] - time.time()) * 1000)))

    async def handle(self, deliveries: Sequence[Delivery]) -> None:
        """Answer the newest request of each seat; acknowledge the requests of the seats
        answered (a seat's older requests are stale). The others stay pending: another
        worker (or this one) reclaims them and tries again."""
        parsed = [(d, DecisionRequest.model_validate_json(d.fields[b"r"])) for d in deliveries]
        latest: dict[tuple[str, int], DecisionRequest] = {}
        for _, request in parsed:
            key = (request.game_id, request.seat)
            if key not in latest or latest[key].version < request.version:
                latest[key] = request
        outcomes = await asyncio.gather(
            *(self.consider(r) for r in latest.values()), return_exceptions=True
        )
        done = set()
        for key, outcome in zip(latest, outcomes, strict=True):
            if isinstance(outcome, BaseException):
                log.error("decision failed", game=key[0], seat=key[1], exc_info=outcome)
            elif outcome:
                done.add(key)
        by_stream: dict[str, list[str]] = {}
        for d, request in parsed:
            if (request.game_id, request.seat) in done:
                by_stream.setdefault(d.stream, []).append(d.id)
        for stream, ids in by_stream.items():
            await self.reader.ack(stream, ids)

    async def consider(self, request: DecisionRequest) -> bool:
        """Answer for a bot seat or a seat whose player left, or start a human's clock;
        False when the answer has to wait (the seat's view is not there yet)."""
        seats: Any = await self.redis.hgetall(self.keys.seats(request.game_id))
        who = seats.get(str(request.seat).encode(), b"").decode()
        if who.startswith("bot:"):
            return await self.play(
                request.game_id,
                request.version,
                request.seat,
                who[4:],
                "bot",
                request.deadline.timestamp(),
            )
        if who == "left":
            return await self.play(
                request.game_id, request.version, request.seat, FALLBACK_LEVEL, "fallback"
            )
        if who == "human":  # the engine set the deadline: the table's, else the default
            member = json.dumps([request.game_id, request.version, request.seat])
            await self.redis.zadd(self.keys.deadlines(), {member: request.deadline.timestamp()})
        return True

    async def fire_deadlines(self) -> None:
        """Play for humans whose time ran out (each due entry is taken by one worker; one
        that cannot be answered yet is due again a second later)."""
        due: Any = await self.redis.zrangebyscore(
            self.keys.deadlines(), "-inf", time.time(), 0, 100
        )
        for member in due:
            if await self.redis.zrem(self.keys.deadlines(), member):
                game_id, version, seat = json.loads(member)
                if not await self.play(game_id, version, seat, FALLBACK_LEVEL, "fallback"):
                    await self.redis.zadd(self.keys.deadlines(), {member: time.time() + 1})

    async def play(
        self,
        game_id: str,
        version: int,
        seat: int,
        level: str,
        actor: str,
        deadline: float | None = None,
    ) -> bool:
        """Decide for ``seat`` at ``version`` from its view, unless the game has moved on;
        answer before ``deadline`` (a Unix time) when one is given. False when the view
        has not reached ``version`` yet: nothing was decided."""
        command_id = hashlib.sha1(f"{game_id}:{version}:{seat}".encode()).hexdigest()
        with bound_contextvars(game=game_id, command=command_id, seat=seat):  # on every line
            view = await self._view_at(game_id, seat, version)
            if view is None:
                return False
            if view["version"] != version or not view["legal_commands"]:
                return True  # stale: someone moved already, or the seat has nothing to decide
            budget = self.settings.bot_think_ms / 1000
            if deadline is not None:
                budget = max(0.0, min(budget, deadline - time.time() - SAFETY_S))
            rng = random.Random(self.rng.getrandbits(64))
            started = time.perf_counter()
            choice = dict(await asyncio.to_thread(bot(level).choose, view, rng, budget))
            metrics.BOT_DECISION_SECONDS.labels(level, actor).observe(time.perf_counter() - started)
            kind = choice.pop("type")
            choice.pop("seat", None)
            await self.sender.send(
                CommandEnvelope(
                    command_id=command_id,
                    game_id=game_id,
                    seat=seat,
                    type=kind,
                    payload=choice,
                    actor="bot" if actor == "bot" else "fallback",
                )
            )
            return True

    async def _view_at(self, game_id: str, seat: int, version: int) -> dict[str, Any] | None:
        """The seat's view once the projection has caught up with ``version``."""
        for _ in range(200):
            view = await read_view(self.redis, self.keys, game_id, seat)
            if view is not None and view["version"] >= version:
                return view
            await asyncio.sleep(0.01)
        log.warning("view lagging", game=game_id, version=version)
        return None
