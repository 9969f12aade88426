"""Helpers for backbone tests: legal command sequences played locally, engines in-process."""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

from redis.asyncio import Redis

from services.engine import Engine
from services.lobby.views import ViewProjector
from shared.bus import Broker, CommandSender, Delivery, Keys
from shared.bus.wants import KEPT_S, want
from shared.contracts import CommandEnvelope, EventEnvelope
from shared.eventstore import EventStore
from shared.games import age_of_discovery as aod
from shared.settings import Settings

RULES = aod.compile_rules(aod.load_ruleset("standard"), {})


def create_game(game_id: str, players: int = 3, seed: int = 1) -> CommandEnvelope:
    return CommandEnvelope(
        game_id=game_id,
        type="create_game",
        actor="system",
        payload={"ruleset": "standard", "players": players, "seed": seed},
    )


def envelope(game_id: str, command: aod.Command) -> CommandEnvelope:
    data = command.to_dict()
    kind, seat = data.pop("type"), data.pop("seat")
    return CommandEnvelope(game_id=game_id, seat=seat, type=kind, payload=data)


def stored(
    game_id: str,
    event: aod.Event,
    version: int,
    actor: str | None = None,
    cause: str | None = None,
) -> EventEnvelope:
    """A rules event as the event store keeps it, at ``version`` of ``game_id``'s log."""
    return EventEnvelope(
        game_id=game_id,
        version=version,
        type=event.type,
        data=event.data,
        secret=event.secret,
        visibility=event.visibility,
        actor=actor,
        causation_id=cause,
    )


def play_locally(
    game_id: str, players: int, seed: int, limit: int | None = None
) -> tuple[list[CommandEnvelope], aod.GameState]:
    """A legal command sequence (create_game first) and the state it leads to."""
    state, _ = aod.new_game(RULES, None, players, seed)
    chooser = random.Random(seed)
    commands = [create_game(game_id, players, seed)]
    while (decisions := aod.pending(state)) and (limit is None or len(commands) <= limit):
        seat = chooser.choice(decisions).seat
        command = chooser.choice(aod.legal_commands(state, seat))
        aod.decide_into(state, command)
        commands.append(envelope(game_id, command))
    return commands, state


def settings_for(keys: Keys, **overrides: Any) -> Settings:
    base: dict[str, Any] = {
        "key_prefix": keys.prefix,
        "partitions": keys.partitions,
        "lease_ttl_ms": 1000,
        "claim_idle_ms": 200,
        "max_deliveries": 3,
        "dead_letter_after_ms": 0,  # dead-lettering tests give up on an entry at once
        "snapshot_every": 40,
    }
    return Settings(**{**base, **overrides})


@asynccontextmanager
async def running_engine(redis: Redis, keys: Keys, **overrides: Any) -> AsyncIterator[Engine]:
    engine = Engine(redis, settings_for(keys, **overrides), keys)
    stop = asyncio.Event()
    task = asyncio.create_task(engine.run(stop))
    try:
        yield engine
    finally:
        stop.set()
        await task


@asynccontextmanager
async def running_projector(
    redis: Redis, keys: Keys, **options: Any
) -> AsyncIterator[ViewProjector]:
    """The views projection running (following the wanted views; it reads the event
    streams of the partitions of wanted games)."""
    projector = ViewProjector(redis, keys, **options)
    stop = asyncio.Event()
    task = asyncio.create_task(projector.run(stop))
    try:
        await wait_for(_started(projector))
        yield projector
    finally:
        stop.set()
        await task


async def want_views(redis: Redis, keys: Keys, *game_ids: str) -> None:
    """Have the views projection project these games (as a reader of their views does)."""
    broker = Broker(redis, service="test")
    async with redis.pipeline(transaction=False) as pipe:
        for game_id in game_ids:
            await want(broker, pipe, keys, game_id, KEPT_S)
        await pipe.execute()


def _started(projector: ViewProjector) -> Callable[[], Awaitable[bool]]:
    async def started() -> bool:
        return projector.started.is_set()

    return started


async def read_as(
    redis: Redis, group: str, consumer: str, stream: str, count: int
) -> list[Delivery]:
    """Entries read by ``consumer`` of ``group`` (pending in its name until acknowledged):
    what a consumer that then dies leaves behind."""
    reply = await redis.xreadgroup(group, consumer, {stream: ">"}, count=count)
    return [Delivery(stream, i.decode(), f) for _, entries in reply for i, f in entries]


async def replayed_hash(engine: Engine, game_id: str) -> str:
    events = await engine.store.read(game_id)
    state = aod.replay(RULES, [aod.Event(e.type, e.data, e.secret, e.visibility) for e in events])
    return state.state_hash()


async def wait_for(predicate: Any, timeout_s: float = 20.0, every_s: float = 0.05) -> None:
    """Poll an async predicate until it holds (a test waits on real services, not on time)."""
    deadline = asyncio.get_running_loop().time() + timeout_s
    while not await predicate():
        if asyncio.get_running_loop().time() > deadline:
            raise TimeoutError("condition not reached in time")
        await asyncio.sleep(every_s)


async def wait_for_actor(
    redis: Redis, keys: Keys, game_id: str, actor: str, timeout_s: float = 20.0
) -> None:
    """Wait until ``game_id``'s log holds an event by ``actor`` (``bot``, ``fallback``...):
    the seat a test handed to a bot player, or to its deadlines, was played."""

    async def acted() -> bool:
        events = await EventStore(redis, keys).read(game_id)
        return any(e.actor == actor for e in events)

    await wait_for(acted, timeout_s=timeout_s, every_s=0.1)


def same_partition(keys: Keys, prefix: str, count: int) -> list[str]:
    """``count`` game ids (``prefix-<n>``) that all fall in one partition."""
    by_partition: dict[int, list[str]] = {}
    n = 0
    while True:
        game_id = f"{prefix}-{n}"
        found = by_partition.setdefault(keys.partition(game_id), [])
        found.append(game_id)
        if len(found) == count:
            return found
        n += 1


async def play_to_the_end(
    redis: Redis, keys: Keys, game_id: str, players: int = 3, seed: int = 4
) -> str:
    """Send a whole legal game to the running engine (all at once: the engine handles a
    partition in order) and wait until it records the final hash, which it returns."""
    commands, final = play_locally(game_id, players, seed)
    await CommandSender(redis, keys).send_many(commands)

    async def finished() -> bool:
        return bool(await redis.hget(keys.meta(game_id), "final_hash"))

    await wait_for(finished, timeout_s=60)
    return final.state_hash()
