"""The views projection: each game's public view and per-seat extras, kept in Redis.

It follows the partition event streams through its own consumer group. An entry only says
"this game changed, up to this version": the projector brings its cached state of the game
up to the newest version in the game's log (the engine's log, server side, so it can apply
the events' hidden parts), then stores the spectator view and, per seat, what only that seat
sees (its legal commands, its pending casualty choice). A Lua script writes a view only if
it is newer than the stored one, so several projectors, redeliveries and any order of
notifications all leave the newest view. Reads never replay a log.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

import structlog
from redis.asyncio import Redis

from services.engine.codec import AgeOfDiscoveryCodec
from shared.bus import Delivery, GroupReader, Keys, ensure_group
from shared.eventstore import EventStore
from shared.games import age_of_discovery as aod
from shared.loops import keep_running

log = structlog.get_logger("caravel.views")

GROUP = "views"
CACHE_GAMES = 20_000

_WRITE = """
-- KEYS: 1 view hash. ARGV: 1 version, then field/value pairs.
local current = tonumber(redis.call('HGET', KEYS[1], 'version') or '0')
if tonumber(ARGV[1]) <= current then return 0 end
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 'version', ARGV[1], unpack(ARGV, 2))
return 1
"""


def view_key(keys: Keys, game_id: str) -> str:
    return f"{keys.prefix}:{{{keys.partition(game_id)}}}:view:{game_id}"


def seat_extras(state: aod.GameState, seat: int) -> dict[str, Any]:
    """What a seat sees beyond the spectator view."""
    extras: dict[str, Any] = {
        "legal_commands": [c.to_dict() for c in aod.legal_commands(state, seat)]
    }
    if state.battles and seat in state.choices:
        extras["your_casualty_choice"] = state.choices[seat]
    return extras


class ViewProjector:
    def __init__(self, redis: Redis, keys: Keys, consumer: str | None = None) -> None:
        self.redis = redis
        self.keys = keys
        self.store = EventStore(redis, keys)
        self.codec = AgeOfDiscoveryCodec()
        self.reader = GroupReader(
            redis, GROUP, consumer or f"views-{uuid.uuid4().hex[:8]}", keys.dead_letters()
        )
        self.games: OrderedDict[str, tuple[aod.GameState, int]] = OrderedDict()
        self._write = redis.register_script(_WRITE)
        self._streams = [keys.events(p) for p in keys.all_partitions()]

    async def start(self) -> None:
        for stream in self._streams:
            await ensure_group(self.redis, stream, GROUP)

    async def run(self, stop: asyncio.Event, claim_idle_ms: int = 10_000) -> None:
        """Project until ``stop``; every ``claim_idle_ms`` / 2, first take over what another
        projector left pending that long (it died), and a batch that fails stays pending."""
        await self.start()

        async def serve_round() -> None:
            await self.handle(await self.reader.next_batch(self._streams, 500, 100, claim_idle_ms))

        await keep_running(
            stop, serve_round, log, "views batch failed; it stays pending and is reclaimed"
        )

    async def step(self, block_ms: int | None = None, count: int = 500) -> int:
        """Project one batch of notifications; returns how many entries it read."""
        deliveries = await self.reader.read(self._streams, count, block_ms)
        await self.handle(deliveries)
        return len(deliveries)

    async def handle(self, deliveries: Sequence[Delivery]) -> None:
        """Project the games the entries name, then acknowledge the entries."""
        latest: dict[str, int] = {}
        for d in deliveries:
            game_id = d.fields[b"g"].decode()
            latest[game_id] = max(latest.get(game_id, 0), int(d.fields[b"v"]))
        if latest:
            await self.project(sorted(latest))
        by_stream: dict[str, list[str]] = {}
        for d in deliveries:
            by_stream.setdefault(d.stream, []).append(d.id)
        for stream, ids in by_stream.items():
            await self.reader.ack(stream, ids)

    async def project(self, game_ids: Sequence[str]) -> None:
        """Bring each game's view up to the newest version of its log."""
        missing = [g for g in game_ids if g not in self.games]
        if missing:
            for game_id, loaded in (await self.store.load_many(missing, self.codec)).items():
                if loaded.state is not None:
                    self.games[game_id] = (loaded.state, loaded.version)
        cached = [g for g in game_ids if g in self.games and g not in missing]
        async with self.redis.pipeline(transaction=False) as pipe:
            for game_id in cached:
                pipe.xrange(self.keys.log(game_id), min=f"{self.games[game_id][1] + 1}-0")
            logs: list[Any] = await pipe.execute()
        for game_id, entries in zip(cached, logs, strict=True):
            state, version = self.games[game_id]
            for event in self.store.decode(entries):
                if event.version == version + 1:
                    self.codec.apply(state, event)
                    version = event.version
            self.games[game_id] = (state, version)
        async with self.redis.pipeline(transaction=False) as pipe:
            for game_id in game_ids:
                if game_id in self.games:
                    await self._store_view(pipe, game_id)
            await pipe.execute()
        while len(self.games) > CACHE_GAMES:
            self.games.popitem(last=False)

    async def _store_view(self, pipe: Any, game_id: str) -> None:
        state, version = self.games[game_id]
        fields: list[Any] = ["public", json.dumps(aod.view(state, None), separators=(",", ":"))]
        for seat in range(state.n):
            fields += [f"seat:{seat}", json.dumps(seat_extras(state, seat), separators=(",", ":"))]
        await self._write(keys=[view_key(self.keys, game_id)], args=[version, *fields], client=pipe)


async def read_view(
    redis: Redis, keys: Keys, game_id: str, seat: int | None
) -> dict[str, Any] | None:
    """A game's projected view for a seat (``None``: a spectator), or None if unknown."""
    fields = ["version", "public"] + ([f"seat:{seat}"] if seat is not None else [])
    raw = await redis.hmget(view_key(keys, game_id), fields)
    if raw[1] is None:
        return None
    view: dict[str, Any] = json.loads(raw[1])
    if seat is not None:
        extras = json.loads(raw[2]) if raw[2] else {}
        view["seat"] = seat
        view["legal_commands"] = extras.get("legal_commands", [])
        if "your_casualty_choice" in extras and view["resolving"]:
            view["resolving"]["battle"]["your_choice"] = extras["your_casualty_choice"]
    return view
