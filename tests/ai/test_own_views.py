"""Bot seats decide from the view their decision request carries (issue 24): the engine
makes it from the state it holds at the request's version, the append script puts it into
the bot player's stream's entry only, and the bot player decides from the request alone,
with no views projection, no view read and no wants."""

from __future__ import annotations

import asyncio
import random
from typing import Any

import pytest
from redis.asyncio import Redis

from services.ai.service import BotPlayer
from services.engine.decision_requests import own_view_json
from shared.bus import BODY, CommandSender, Keys
from shared.bus.connection import connect
from shared.contracts import CommandEnvelope, DecisionRequest, Seats, dump_json, load_json
from shared.contracts.records import BOT_PREFIX
from shared.eventstore import EventStore
from shared.games import age_of_discovery as aod
from shared.games import api

from ..backbone.helpers import (
    RULES,
    create_game,
    play_locally,
    running_engine,
    settings_for,
    wait_for,
)
from ..cluster import OwnRedis
from ..games.test_protocol import contained


async def _seat_bots(redis: Redis, keys: Keys, game_id: str, levels: list[str]) -> None:
    """Seat bots, as the lobby does before it creates the game."""
    seats = Seats({seat: f"{BOT_PREFIX}{level}" for seat, level in enumerate(levels)})
    mapping: Any = seats.to_mapping()
    await redis.hset(keys.seats(game_id), mapping=mapping)


def _commands(game: api.AnyGame, game_id: str, seed: int, limit: int) -> list[CommandEnvelope]:
    """A four-seat game of ``game`` played locally by random choices: its creation and up
    to ``limit`` commands after it."""
    state, _ = game.new_game(game.rules(game.default_ruleset), 4, seed)
    chooser = random.Random(seed)
    payload = {"game": game.name, "ruleset": game.default_ruleset, "players": 4, "seed": seed}
    commands = [
        CommandEnvelope(game_id=game_id, type="create_game", actor="system", payload=payload)
    ]
    while (decisions := game.pending(state)) and len(commands) <= limit:
        command = chooser.choice(game.legal_commands(state, chooser.choice(decisions).seat))
        game.decide_into(state, command)
        data = command.to_dict()
        kind, seat = data.pop("type"), data.pop("seat")
        commands.append(CommandEnvelope(game_id=game_id, seat=seat, type=kind, payload=data))
    return commands


async def _played(
    redis: Redis, keys: Keys, game_id: str, levels: list[str], game: str = aod.GAME.name
) -> tuple[list[Any], list[Any]]:
    """A four-seat game of ``game`` with bots of ``levels`` played for 60 commands through
    the engine (no bot player: the commands are a local game's); the commands and the
    game's log."""
    await _seat_bots(redis, keys, game_id, levels)
    if game == aod.GAME.name:
        commands, _ = play_locally(game_id, players=4, seed=5, limit=60)
    else:
        commands = _commands(api.get(game), game_id, seed=5, limit=60)
    sender = CommandSender(redis, keys)
    async with running_engine(redis, keys):
        for command in commands:
            assert (await sender.execute(command)).status == "accepted"
    return commands, await EventStore(redis, keys).read(game_id)


async def _requests(redis: Redis, stream: str) -> list[tuple[DecisionRequest, dict[str, Any]]]:
    """The requests on ``stream``, each with its JSON as a plain object."""
    entries: Any = await redis.xrange(stream)
    return [(DecisionRequest.model_validate_json(f[b"r"]), load_json(f[b"r"])) for _, f in entries]


async def test_bots_decide_from_their_requests_views_with_no_projection_and_no_view_read(
    keys: Keys,
) -> None:
    """Two bot seats play a game to its end with the engine and the bot player alone, no
    views projection running, on a Redis of the test's own: no view is ever read (no
    ``HMGET`` but the engine's appends' of the game's meta, no view key, no view update),
    and no game's views are asked for (no wants stream). Before, each bot move waited for
    the projection's view of the seat, and without a projection no bot ever moved ("view
    lagging")."""
    game_id = "g-own-views"
    async with OwnRedis() as server:
        await server.start()
        redis = connect(server.url)
        stop = asyncio.Event()
        try:
            await _seat_bots(redis, keys, game_id, ["greedy", "random"])
            await redis.config_resetstat()
            async with running_engine(redis, keys) as engine:
                player = BotPlayer(redis, keys, settings_for(keys, bot_think_ms=10))
                playing = asyncio.create_task(player.run(stop))
                try:
                    await CommandSender(redis, keys).execute(create_game(game_id, players=2))

                    async def over() -> bool:
                        events = await EventStore(redis, keys).read(game_id)
                        return events[-1].type == "game_ended"

                    await wait_for(over, timeout_s=120, every_s=0.2)
                finally:
                    stop.set()
                    await playing
            stats: Any = await redis.info("commandstats")
            events = await EventStore(redis, keys).read(game_id)
            p = keys.partition(game_id)
            # no view read, by anyone: an HMGET is an append's read of its game's meta
            appends = engine.stats["accepted"] + engine.stats["conflicts"]
            assert stats["cmdstat_hmget"]["calls"] == appends
            assert not await redis.exists(
                keys.view(game_id), keys.view_updates(p), keys.view_wants(p)
            )
            assert {e.actor for e in events} == {"system", "bot"}
            assert {e.data["seat"] for e in events if e.type == "unit_placed"} == {0, 1}
        finally:
            await redis.aclose()


async def test_a_bot_seats_request_carries_its_own_view_and_no_hidden_value(
    redis: Redis, keys: Keys
) -> None:
    """Four bot seats, their moves sent by the test (no bot player): every request on the
    bot player's stream carries the view of its own seat at its version, the game's
    ``view`` for that seat less the legal commands the request lists, and that view is the
    same for a twin state whose hidden values were resampled (``determinize``): no face-down
    token, pile order or generator state, and nothing of another seat's. The requests on the
    decisions stream (the sockets') and those kept in the game's meta carry no view."""
    game_id = "g-own-hidden"
    commands, log = await _played(redis, keys, game_id, ["random"] * 4)
    p = keys.partition(game_id)
    bots = await _requests(redis, keys.bot_decisions(p))
    assert len(bots) >= len(commands) - 1
    seats_seen = set()
    for request, raw in bots:
        upto = log[: request.version]
        state = aod.replay(RULES, [aod.Event(e.type, e.data, e.secret, e.visibility) for e in upto])
        own = aod.view(state, request.seat)
        assert request.legal_commands == own.pop("legal_commands")
        assert request.view == own
        assert request.view["seat"] == request.seat
        twin = aod.view(aod.determinize(state, 99), request.seat)
        assert request.view == {k: v for k, v in twin.items() if k != "legal_commands"}
        assert list(raw)[-1] == "view"  # set into the request's JSON as its last field
        seats_seen.add(request.seat)
    assert seats_seen == {0, 1, 2, 3}
    assert all(r.view is None for r, _ in await _requests(redis, keys.decisions(p)))
    pending: Any = await redis.hget(keys.meta(game_id), "pending")
    assert pending and all("view" not in r for r in load_json(pending))


@pytest.mark.parametrize("name", api.names())
async def test_a_greedy_seats_request_carries_the_part_of_its_view_its_policy_reads(
    redis: Redis, keys: Keys, name: str
) -> None:
    """Greedy seats (0 and 2) beside a random and an MCTS one, their moves sent by the
    test, in every game (each has a ``policy_view``): every greedy seat's request on the
    bot player's stream carries, marked ``"part": "policy"``, the game's ``policy_view`` of
    its seat at the request's version, the same for a twin state whose hidden values were
    resampled (``determinize``), each value its own view's at the same place; the other
    seats' requests carry their whole own view, as before. (Before, every bot seat got its
    whole view: 5 KB made, encoded and parsed a move in The Age of Discovery, 6-7 KB in
    Navegador, which had no policy view.)"""
    game = api.get(name)
    game_id = f"g-own-policy-{name}"
    _, log = await _played(redis, keys, game_id, ["greedy", "random", "greedy", "mcts"], name)
    p = keys.partition(game_id)
    parts = wholes = 0
    for request, _ in await _requests(redis, keys.bot_decisions(p)):
        upto = log[: request.version]
        state = game.replay([api.Event(e.type, e.data, e.secret, e.visibility) for e in upto])
        own = game.view(state, request.seat)
        assert request.legal_commands == own.pop("legal_commands")
        assert request.view is not None
        if request.seat in (0, 2):
            part = game.policy_view(state, request.seat)
            assert part is not None
            assert request.view == {"part": "policy", **part}
            assert part == game.policy_view(game.determinize(state, 99), request.seat)
            assert contained(part, own), part
            parts += 1
        else:
            assert request.view == own
            wholes += 1
    assert parts and wholes


async def test_a_request_whose_game_moved_on_is_not_answered_from_its_view(
    redis: Redis, keys: Keys
) -> None:
    """A bot seat's request at version v, with its view; the game moves past v meanwhile
    (here a move sent for that seat by another sender). The bot player, given the request
    afterwards (a redelivery, a backlog), decides nothing that reaches the game: its
    command is sent only while the game is at v, checked in the send itself."""
    game_id = "g-own-stale"
    await _seat_bots(redis, keys, game_id, ["random", "random"])
    p = keys.partition(game_id)
    sender = CommandSender(redis, keys)
    async with running_engine(redis, keys):
        await sender.execute(create_game(game_id, players=2))
        [(request, _)] = await _requests(redis, keys.bot_decisions(p))
        assert request.view is not None
        move = dict(request.legal_commands[0])
        moved = await sender.execute(
            CommandEnvelope(
                game_id=game_id,
                seat=request.seat,
                type=move.pop("type"),
                payload={k: v for k, v in move.items() if k != "seat"},
            )
        )
        assert moved.status == "accepted" and moved.version > request.version
        player = BotPlayer(redis, keys, settings_for(keys))
        try:
            assert await player.consider(request) is True  # done with: stale
        finally:
            await player.close()
    commands: Any = await redis.xrange(keys.commands(p))
    actors = [CommandEnvelope.model_validate_json(f[BODY]).actor for _, f in commands]
    assert actors == ["system", "player"]  # the game's creation and the move: no bot's


def test_a_bot_seats_own_view_is_its_view_less_the_legal_commands_in_every_game() -> None:
    """The engine makes a bot seat's view from the public view and the seat's private part
    (``Game.private_part``), not from ``game.view``, which lists the legal commands again:
    for every game, every seat of the first 150 states of random 4-seat games, the JSON is
    the same as the game's ``view`` for that seat less its legal commands."""
    for name in api.names():
        game = api.get(name)
        for seed in range(2):
            state, _ = game.new_game(game.rules(game.default_ruleset), 4, seed)
            rng = random.Random(seed)
            for _ in range(150):
                decisions = game.pending(state)
                if not decisions:
                    break
                public = game.public_view(state)
                for seat in range(4):
                    view = game.view(state, seat)
                    del view["legal_commands"]
                    assert own_view_json(game, state, seat, public) == dump_json(view)
                    assert own_view_json(game, state, seat) == dump_json(view)
                d = rng.choice(decisions)
                game.decide_into(state, rng.choice(game.legal_commands(state, d.seat)))


async def test_the_answers_to_a_batch_go_in_one_call_each_sent_only_at_its_version(
    redis: Redis, keys: Keys
) -> None:
    """``send_many_at`` (the bot player's answers to a batch of requests, in one round
    trip): each command is appended only while its game's log is at the version it was
    decided at, and each reply is that game's version, a game that moved on (or has no log
    here) leaving its command out."""
    sender = CommandSender(redis, keys)
    async with running_engine(redis, keys):
        for game_id in ("g-many-a", "g-many-b"):
            await sender.execute(create_game(game_id, players=2))
    at = {g: int(await redis.hget(keys.meta(g), "version") or 0) for g in ("g-many-a", "g-many-b")}
    decided = [
        (CommandEnvelope(game_id="g-many-a", seat=0, type="pass", actor="bot"), at["g-many-a"]),
        (CommandEnvelope(game_id="g-many-b", seat=0, type="pass", actor="bot"), at["g-many-b"] - 1),
        (CommandEnvelope(game_id="g-many-none", seat=0, type="pass", actor="bot"), 1),
    ]
    assert await sender.send_many_at(decided) == [at["g-many-a"], at["g-many-b"], 0]
    bodies = []
    for game_id in ("g-many-a", "g-many-b", "g-many-none"):
        entries: Any = await redis.xrange(keys.commands(keys.partition(game_id)))
        bodies += [CommandEnvelope.model_validate_json(f[BODY]) for _, f in entries]
    bots = [c.game_id for c in bodies if c.actor == "bot"]
    assert bots == ["g-many-a"]


def test_a_seats_secret_casualty_pick_is_in_its_own_view() -> None:
    """The Age of Discovery's private part beyond the seat's number: a seat that has picked
    its casualties in a battle others have still to decide sees its pick (``your_choice``)
    in the view the engine makes for its request, as in the game's ``view``; the other
    seats see that it chose, not what."""
    game = api.get("age_of_discovery")
    for i in range(300):  # simultaneous decisions are rare in random play: games are cheap
        state, _ = game.new_game(game.rules(game.default_ruleset), 2 + i % 3, i)
        rng = random.Random(7 * i + 1)
        while decisions := game.pending(state):
            if len(decisions) > 1:  # the first to decide picks; the others are still to
                picker = decisions[0].seat
                game.decide_into(state, game.legal_commands(state, picker)[0])
                view = game.view(state, picker)
                del view["legal_commands"]
                assert own_view_json(game, state, picker) == dump_json(view)
                battle = (view.get("resolving") or {}).get("battle") or {}
                if "your_choice" in battle:
                    other = load_json(own_view_json(game, state, decisions[1].seat))
                    assert "your_choice" not in other["resolving"]["battle"]
                    assert picker in other["resolving"]["battle"]["chosen"]
                    return
                continue
            d = rng.choice(decisions)
            game.decide_into(state, rng.choice(game.legal_commands(state, d.seat)))
    raise AssertionError("no battle with a casualty pick in 300 random games")
