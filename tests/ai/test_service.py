"""The bot player on the real bus: it answers decision requests, within their deadlines."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

from redis.asyncio import Redis
from redis.exceptions import ConnectionError as RedisConnectionError

from services.ai import service
from services.ai.service import BotPlayer, bot_command_id
from services.lobby.views import ViewProjector
from shared.bus import BODY, CommandSender, Keys, ensure_group
from shared.contracts import CommandEnvelope, CommandResult, DecisionRequest, Seats, dump_json
from shared.contracts.records import BOT_PREFIX, HUMAN, LEFT
from shared.eventstore import EventStore
from shared.games import age_of_discovery as aod
from shared.settings import Settings

from ..backbone.helpers import (
    RULES,
    create_game,
    envelope,
    read_as,
    running_engine,
    running_projector,
    settings_for,
    wait_for,
    wait_for_actor,
)


@asynccontextmanager
async def bots_serving(redis: Redis, keys: Keys, think_ms: int) -> AsyncIterator[None]:
    """The engine, the views projection and one bot player, in this process."""
    stop = asyncio.Event()
    projector = ViewProjector(redis, keys)
    player = BotPlayer(redis, keys, settings_for(keys, bot_think_ms=think_ms))
    async with running_engine(redis, keys):
        tasks = [asyncio.create_task(projector.run(stop)), asyncio.create_task(player.run(stop))]
        try:
            yield
        finally:
            stop.set()
            await asyncio.gather(*tasks)


async def _seat(
    redis: Redis, keys: Keys, game_id: str, bots: tuple[str, str], deadline_s: float | None = None
) -> None:
    """Seat two bots, as the lobby does before it creates the game."""
    seats = Seats({seat: f"{BOT_PREFIX}{level}" for seat, level in enumerate(bots)}, deadline_s)
    mapping: dict[Any, Any] = seats.to_mapping()
    await redis.hset(keys.seats(game_id), mapping=mapping)


async def test_a_bot_game_runs_to_its_end_through_the_engine(redis: Redis, keys: Keys) -> None:
    """Two bot seats (mcts and random) with a short move deadline: the bot player answers
    every decision request from the bus and the game reaches its end, every move the bots'."""
    await _seat(redis, keys, "g-bots", ("mcts", "random"), deadline_s=0.15)
    async with bots_serving(redis, keys, think_ms=1000):
        result = await CommandSender(redis, keys).execute(create_game("g-bots", players=2))
        assert result.status == "accepted"

        async def over() -> bool:
            events = await EventStore(redis, keys).read("g-bots")
            return events[-1].type == "game_ended"

        await wait_for(over, timeout_s=240, every_s=0.2)
    events = await EventStore(redis, keys).read("g-bots")
    assert {e.actor for e in events} == {"system", "bot"}
    assert {e.data["seat"] for e in events if e.type == "unit_placed"} == {0, 1}


SLACK_S = 1.0  # a send delayed by a loaded machine; the budget would be 4.7 s late


async def test_a_deadline_shorter_than_the_budget_is_still_met(redis: Redis, keys: Keys) -> None:
    """The mcts seat may think 5 s, but each move is due 0.3 s after its request: every
    answer reaches the command stream by its request's deadline, not after the 5 s budget
    (the stream entry id is the Redis server's clock, in ms). The bot answers ``SAFETY_S``
    (0.1 s) early; a loaded machine may delay the send past that, so the check allows
    ``SLACK_S`` more, still far under the budget the deadline must cut short."""
    await _seat(redis, keys, "g-due", ("mcts", "random"), deadline_s=0.3)
    partition = keys.partition("g-due")
    secret = settings_for(keys).signing_key()
    async with bots_serving(redis, keys, think_ms=5000):
        await CommandSender(redis, keys).execute(create_game("g-due", players=2))

        async def answered() -> list[tuple[DecisionRequest, float]]:
            commands: Any = await redis.xrange(keys.commands(partition))
            sent = {}
            for entry_id, fields in commands:
                command = CommandEnvelope.model_validate_json(fields[BODY])
                sent[command.command_id] = int(entry_id.split(b"-")[0]) / 1000
            out = []
            requests: Any = await redis.xrange(keys.decisions(partition))
            for _, fields in requests:
                request = DecisionRequest.model_validate_json(fields[b"r"])
                command_id = bot_command_id(secret, request.game_id, request.version, 0)
                if request.seat == 0 and command_id in sent:
                    out.append((request, sent[command_id]))
            return out

        async def five_answered() -> bool:
            return len(await answered()) >= 5

        await wait_for(five_answered, timeout_s=60, every_s=0.1)
        for request, at in await answered():
            late = at - request.deadline.timestamp()
            assert late < SLACK_S, (request.version, at, request.deadline)


async def test_a_request_a_dead_worker_left_pending_is_answered_by_a_live_one(
    redis: Redis, keys: Keys
) -> None:
    """A worker read the first decision request and died without answering: a live bot
    player reclaims it once it has been idle for CARAVEL_CLAIM_IDLE_MS, and the game moves."""
    await _seat(redis, keys, "g-orphan", ("random", "random"))
    stream = keys.bot_decisions(keys.partition("g-orphan"))
    stop = asyncio.Event()
    projector = ViewProjector(redis, keys)
    async with running_engine(redis, keys):
        projecting = asyncio.create_task(projector.run(stop))
        result = await CommandSender(redis, keys).execute(create_game("g-orphan", players=2))
        await ensure_group(redis, stream, "ai")
        [orphan] = await read_as(redis, "ai", "dead-worker", stream, 10)  # never answered
        request = DecisionRequest.model_validate_json(orphan.fields[b"r"])
        assert request.version == result.version
        settings = settings_for(keys, claim_idle_ms=200)
        await _play_until_moved(redis, keys, "g-orphan", request.version, settings)
        stop.set()
        await projecting
    answer = (await EventStore(redis, keys).read("g-orphan"))[request.version]
    key = settings_for(keys).signing_key()
    expected = bot_command_id(key, "g-orphan", request.version, request.seat)
    assert (answer.actor, answer.causation_id) == ("bot", expected)
    # The orphan was answered and acknowledged (the next request, if the player had already
    # read it when it stopped, may still be pending: it is not this test's).
    pending: Any = await redis.xpending_range(stream, "ai", "-", "+", 10)
    assert orphan.id.encode() not in {p["message_id"] for p in pending}


async def _viewless_bot_game(
    redis: Redis, keys: Keys, game_id: str, bots: tuple[str, str]
) -> CommandResult:
    """A bot game whose decision requests come without the seats' views, as an engine not
    yet upgraded writes them: created before its seats are (the engine reads them when it
    loads the game, and makes views for the bot seats it read then: none), then seated, its
    first request put on the bot player's stream as such an engine's append did."""
    result = await CommandSender(redis, keys).execute(create_game(game_id, players=2))
    await _seat(redis, keys, game_id, bots)
    p = keys.partition(game_id)
    [(_, fields)] = await redis.xrange(keys.decisions(p), count=1)  # type: ignore[misc]
    assert b"view" not in fields[b"r"]
    await redis.xadd(keys.bot_decisions(p), {b"r": fields[b"r"]})
    return result


async def _first_request(redis: Redis, keys: Keys, game_id: str) -> DecisionRequest:
    stream = keys.decisions(keys.partition(game_id))

    async def asked() -> bool:
        return bool(await redis.xlen(stream))

    await wait_for(asked)
    first: Any = await redis.xrange(stream, count=1)
    [(_, fields)] = first
    return DecisionRequest.model_validate_json(fields[b"r"])


async def test_a_request_waits_for_its_view_and_the_projection_wakes_it(
    any_redis: Redis, keys: Keys
) -> None:
    """The request is there before the seat's view: the bot player waits (no answer, no
    command), the projector writes the view and announces it on the partition's view
    updates, and the bot answers at once, choosing among the commands the request carries
    (here cut down to one, so its answer can only be that one)."""
    await _seat(any_redis, keys, "g-wake", ("random", "random"))
    partition = keys.partition("g-wake")
    async with running_engine(any_redis, keys):
        await CommandSender(any_redis, keys).execute(create_game("g-wake", players=2))
        request = await _first_request(any_redis, keys, "g-wake")
        only = request.legal_commands[-1]
        request = request.model_copy(update={"legal_commands": [only]})
        player = BotPlayer(any_redis, keys, settings_for(keys))
        answering = asyncio.create_task(player.consider(request))
        try:
            await asyncio.sleep(0.3)
            assert not answering.done()
            assert await any_redis.xlen(keys.commands(partition)) == 1  # create_game only
            async with running_projector(any_redis, keys):
                # True: answered once the view came, before the bot's wait for it ran out.
                assert await asyncio.wait_for(answering, service.VIEW_WAIT_S) is True
        finally:
            await player.close()
        updates: Any = await any_redis.xrange(keys.view_updates(partition))
        (_, update), *_ = updates  # the first view written (the bot's move may follow)
        assert update == {b"g": b"g-wake", b"v": str(request.version).encode()}
    commands: Any = await any_redis.xrange(keys.commands(partition))
    sent = [CommandEnvelope.model_validate_json(fields[BODY]) for _, fields in commands]
    answer = next(c for c in sent if c.actor == "bot")
    assert {"type": answer.type, "seat": answer.seat, **answer.payload} == only


async def test_a_view_that_never_comes_leaves_the_request_unanswered(
    redis: Redis, keys: Keys
) -> None:
    """No projection runs: after waiting ``VIEW_WAIT_S`` the bot player gives up without
    answering (the request stays pending, to be reclaimed and tried again)."""
    await _seat(redis, keys, "g-blind", ("greedy", "greedy"))
    async with running_engine(redis, keys):
        await CommandSender(redis, keys).execute(create_game("g-blind", players=2))
        request = await _first_request(redis, keys, "g-blind")
        player = BotPlayer(redis, keys, settings_for(keys))
        started = time.monotonic()
        try:
            assert await player.consider(request) is False
        finally:
            await player.close()
        assert time.monotonic() - started >= service.VIEW_WAIT_S
    assert await redis.xlen(keys.commands(keys.partition("g-blind"))) == 1  # create_game only


async def test_a_player_moving_under_the_bots_ids_cannot_freeze_the_game(
    redis: Redis, keys: Keys
) -> None:
    """Issue 25's hijack: bots named their commands by a plain hash of game, version and
    seat, and a client may choose its command ids, so a player who sent its own legal move
    under the id the bot seat would use next made the engine answer the bot ``duplicate``:
    the bot seat never moved and the table was stuck for good. Now the engine scopes every
    id to its seat and bots sign theirs with the deployment's secret. The worst case here:
    the player knows the secret and sends each of its moves under the id the bot will use at
    the version that move leads to. Every such move is accepted, the bot still moves after
    each, and the game reaches its end."""
    game_id = "g-hijack"
    await redis.hset(keys.seats(game_id), mapping={"0": "human", "1": f"{BOT_PREFIX}random"})
    secret = settings_for(keys).signing_key()
    sender, store = CommandSender(redis, keys), EventStore(redis, keys)
    aimed = 0
    async with bots_serving(redis, keys, think_ms=20):
        await sender.execute(create_game(game_id, players=2, seed=3))
        while (events := await store.read(game_id))[-1].type != "game_ended":
            state = aod.replay(
                RULES, [aod.Event(e.type, e.data, e.secret, e.visibility) for e in events]
            )
            if not any(d.seat == 0 for d in aod.pending(state)):

                async def moved(seen: int = len(events)) -> bool:
                    return len(await store.read(game_id)) > seen  # the bot answered

                await wait_for(moved)
                continue
            command = aod.legal_commands(state, 0)[0]
            after = len(events) + len(aod.decide_into(state, command))
            bots_turn = any(d.seat == 1 for d in aod.pending(state))
            aimed += bots_turn
            taken = bot_command_id(secret, game_id, after, 1)
            hijack = envelope(game_id, command).model_copy(update={"command_id": taken})
            assert (await sender.execute(hijack)).status == "accepted"
    assert aimed > 0  # moves were sent under ids the bot went on to use
    assert {e.actor for e in events if e.type == "unit_placed"} == {"player", "bot"}


async def test_bot_games_finish_after_their_requests_were_dead_lettered(
    redis: Redis, keys: Keys
) -> None:
    """Issue 25: with the views projection away, every delivery of a bot seat's request
    finds no view; after ``max_deliveries`` the request goes to the dead letters, and the
    bot seat, which has no clock, waited for good. Now a request not answered is kept among
    the deadlines: once the projection is back, the game plays on to its end. (The requests
    come without the seats' views, as an engine not yet upgraded wrote them: those with a
    view need no projection.)"""
    stream = keys.bot_decisions(keys.partition("g-dead"))
    dead = keys.dead_letters(keys.partition("g-dead"))
    stop = asyncio.Event()
    settings = settings_for(keys, claim_idle_ms=100, max_deliveries=1, bot_think_ms=10)
    async with running_engine(redis, keys):
        player = BotPlayer(redis, keys, settings)
        playing = asyncio.create_task(player.run(stop))
        result = await _viewless_bot_game(redis, keys, "g-dead", ("random", "random"))

        async def dead_lettered() -> bool:
            return bool(await redis.xlen(dead))

        await wait_for(dead_lettered, timeout_s=60)
        pending: Any = await redis.xpending(stream, "ai")
        assert pending["pending"] == 0  # nothing left on the stream to answer it
        assert len(await EventStore(redis, keys).read("g-dead")) == result.version

        async with running_projector(redis, keys):

            async def over() -> bool:
                events = await EventStore(redis, keys).read("g-dead")
                return events[-1].type == "game_ended"

            await wait_for(over, timeout_s=120, every_s=0.2)
        stop.set()
        await playing


async def test_a_clock_its_human_beat_is_removed_without_a_view(redis: Redis, keys: Keys) -> None:
    """A human's clock at a version the game has left (the human moved in time) is removed
    when due, neither played nor its view asked for (no projection runs: asking would have
    left it waiting, and in place); a clock of the game's current version stays."""
    await redis.hset(keys.seats("g-beat"), mapping=dict(Seats({0: HUMAN, 1: HUMAN}).to_mapping()))
    key = keys.deadlines(keys.partition("g-beat"))
    async with running_engine(redis, keys):
        sender = CommandSender(redis, keys)
        await sender.execute(create_game("g-beat", players=2))
        request = await _first_request(redis, keys, "g-beat")
        move = dict(request.legal_commands[0])
        answer = await sender.execute(
            CommandEnvelope(
                command_id="beat-1",
                game_id="g-beat",
                seat=request.seat,
                type=move.pop("type"),
                payload={k: v for k, v in move.items() if k != "seat"},
            )
        )
    assert answer.status == "accepted" and answer.version > request.version
    beaten = dump_json(["g-beat", request.version, request.seat])
    current = dump_json(["g-beat", answer.version, 1 - request.seat])
    await redis.zadd(key, {beaten: 1.0, current: time.time() + 3600})
    player = BotPlayer(redis, keys, settings_for(keys))
    try:
        await player._fire(key)
    finally:
        await player.close()
    assert await redis.zrange(key, 0, -1) == [current.encode()]
    assert not await redis.exists(keys.view_wants(keys.partition("g-beat")))
    assert await redis.xlen(keys.commands(keys.partition("g-beat"))) == 2  # no fallback's


async def test_requests_its_group_left_on_the_decisions_streams_are_taken_over(
    redis: Redis, keys: Keys
) -> None:
    """A bot player of before the bots' own streams left a request pending (read, never
    answered) and another unread on a decisions stream: a player started now moves both to
    the bot decisions stream and answers them, and its group leaves the decisions stream
    (whose entries it would otherwise keep from being trimmed)."""
    await _seat(redis, keys, "g-legacy", ("random", "random"))
    old = keys.decisions(keys.partition("g-legacy"))
    async with running_engine(redis, keys), running_projector(redis, keys):
        await redis.xgroup_create(old, "ai", "0", mkstream=True)  # before any request
        await CommandSender(redis, keys).execute(create_game("g-legacy", players=2))
        await redis.delete(keys.bot_decisions(keys.partition("g-legacy")))  # as before
        [pending] = await read_as(redis, "ai", "old-worker", old, 1)
        request = DecisionRequest.model_validate_json(pending.fields[b"r"])
        settings = settings_for(keys, bot_think_ms=10)
        await _play_until_moved(redis, keys, "g-legacy", request.version, settings)
    groups: Any = await redis.xinfo_groups(old)
    assert "ai" not in {g["name"] for g in groups}


async def _play_until_moved(
    redis: Redis, keys: Keys, game_id: str, version: int, settings: Settings
) -> None:
    """Run a bot player until ``game_id``'s log is past ``version``, then stop it."""
    stop = asyncio.Event()
    playing = asyncio.create_task(BotPlayer(redis, keys, settings).run(stop))

    async def moved() -> bool:
        return len(await EventStore(redis, keys).read(game_id)) > version

    try:
        await wait_for(moved)
    finally:
        stop.set()
        await playing


def test_a_bot_seat_whose_answer_failed_on_redis_is_tried_again_soon_not_at_its_deadline() -> None:
    """A bot seat has no clock: its request's deadline is the table's move time (a minute by
    default). When its answer failed because Redis was away or busy (at 1,000 tables'
    starts the bot player's pool had no connection free: "No connection available"), the
    game stood still until that deadline; it is now tried again after ``RETRY_S``. A bot's
    own bug, or a human's seat (whose clock runs), still waits for the deadline."""
    deadline = datetime.now(UTC) + timedelta(seconds=60)
    request = DecisionRequest(
        game_id="g", version=3, seat=1, kind="move", deadline=deadline, legal_commands=[]
    )
    away = RedisConnectionError("No connection available.")
    now = time.time()
    for who in (f"{BOT_PREFIX}greedy", LEFT):
        soon = service._retry_at(request, who, away)
        assert now <= soon <= time.time() + service.RETRY_S, who
    assert service._retry_at(request, f"{BOT_PREFIX}greedy", ValueError("a bug")) == (
        deadline.timestamp()
    )
    assert service._retry_at(request, HUMAN, away) == deadline.timestamp()


def test_a_bots_command_id_is_the_same_as_every_earlier_release_makes_it() -> None:
    """A request answered twice, by a bot player of this release and one of before (a
    rolling upgrade, a retry), must name one command: the id is still the first 32 hex
    digits of the HMAC-SHA256 of ``game:version:seat`` under the deployment's key, as
    ``hmac.new(...).hexdigest()`` made it (now ``hmac.digest``, issue 24)."""
    import hashlib
    import hmac

    for key, game_id, version, seat in ((b"k" * 32, "g-1", 7, 2), (b"\x00\xff", "g-\u00e9", 0, 0)):
        expected = hmac.new(key, f"{game_id}:{version}:{seat}".encode(), hashlib.sha256)
        assert bot_command_id(key, game_id, version, seat) == expected.hexdigest()[:32]


async def test_a_clock_written_while_the_deadlines_loop_sleeps_long_is_played_on_time(
    redis: Redis, keys: Keys, monkeypatch: Any
) -> None:
    """The bot player's deadlines loop reads no deadline for 30 s (its waits made that long
    here) while two humans' game starts with a 0.3 s move deadline: the engine's append,
    writing the partition's earliest clock, wakes the loop, and the fallback plays the
    seat within a few seconds, not at the loop's next read 30 s later."""
    monkeypatch.setattr(service, "WAIT_MS", 30_000)
    monkeypatch.setattr(service, "IDLE_WAIT_MS", 30_000, raising=False)
    seats = Seats({0: HUMAN, 1: HUMAN}, 0.3)
    await redis.hset(keys.seats("g-asleep"), mapping=dict(seats.to_mapping()))
    async with bots_serving(redis, keys, think_ms=100):
        await asyncio.sleep(1.0)  # its first read done: the loop sleeps
        result = await CommandSender(redis, keys).execute(create_game("g-asleep", players=2))
        assert result.status == "accepted"
        await wait_for_actor(redis, keys, "g-asleep", "fallback", timeout_s=5)
