"""Navegador, the second game, on every service over real HTTP and WebSocket: a table of two
humans and two bots played to the end, its live views, standings, results, ratings of its own
and analytics facts; matchmaking for it fills the free seats with bots."""

from __future__ import annotations

import asyncio
import json
import random
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import websockets
from prometheus_client.parser import text_string_to_metric_families
from redis.asyncio import Redis

from shared.bus import Keys
from shared.eventstore import EventStore
from shared.eventstore.codec import to_event
from shared.games import api

from ..scoring.helpers import game_ids, play_games
from .helpers import SEATS_FROM_ONE_ADDRESS, bearer, running_lobby, wait_for_view

GAME = "navegador"
FACT_KINDS = {"exploration", "colony", "building_bought", "privilege"}
RANDOM_MOVES = 0.25
"""How often a human seat moves at random: greedy humans make games about half as long as
random ones, but greedy seats alone never explore and never end the game (the greedy policy
sends no two ships out together), so some chance keeps the map opening."""
DEADLINE_S = 30
"""A move's deadline at the table: short, so a human seat that stopped answering holds the
game up seconds rather than the default hour (the fallback plays for it)."""


async def _human(
    client: httpx.AsyncClient, url: str, game_id: str, token: str, rng: random.Random
) -> tuple[list[dict[str, Any]], int]:
    """A human seat played through its socket until the server closes it at the game's end:
    at each decision request, the seat's ``GET /view`` (at the request's version) is read
    and the command the game's greedy policy values most in it is posted, one time in
    ``RANDOM_MOVES`` one of its legal commands at random instead. Every message the socket
    got, and how many moves the seat made."""
    policy = api.get(GAME).policy()
    assert policy is not None
    got: list[dict[str, Any]] = []
    moves = 0
    async with websockets.connect(url, max_size=None) as ws:
        async for raw in ws:
            got.append(message := json.loads(raw))
            if message["type"] != "decision":
                continue
            view = await wait_for_view(client, game_id, token, message["version"])
            legal = view["legal_commands"]
            assert view["version"] == message["version"] and legal, view
            values = policy(view, rng)
            best = legal[max(range(len(legal)), key=values.__getitem__)]
            answer = await client.post(
                f"/games/{game_id}/commands",
                json=rng.choice(legal) if rng.random() < RANDOM_MOVES else best,
                headers=bearer(token),
            )
            assert answer.status_code == 200, answer.json()
            moves += 1
    return got, moves


async def _eventually(client: httpx.AsyncClient, path: str, ready: Any) -> Any:
    """GET ``path`` until ``ready(answer)`` holds (the scoring projection follows the log)."""
    for _ in range(3000):
        response = await client.get(path)
        if response.status_code == 200:
            answer = (
                response.json() if "json" in response.headers["content-type"] else response.text
            )
            if ready(answer):
                return answer
        await asyncio.sleep(0.01)
    raise TimeoutError(f"{path} never got ready")


async def test_a_navegador_table_of_two_humans_and_two_bots_is_played_and_scored(
    redis: Redis, redis_url: str, keys: Keys, tmp_path: Path
) -> None:
    """Two humans (greedy moves from their seat's /view) and two greedy bots play a
    Navegador table to the end; a human seat whose move fails fails the test at once (the
    others are cancelled, and the table's short deadline would play for it anyway).
    Seat 0's socket carries every event it may see and its decision requests; the finished
    game's result is the rules' score of the replayed log, its players are rated on the
    Navegador leaderboard while The Age of Discovery's ratings stay as they were, and its
    facts (explorations, colonies, buildings, privileges) are counted per seat and shown in
    the analytics summary the dashboard page draws."""
    (first_game,) = game_ids(keys, 1, "aod")
    # A whole game takes minutes on a busy machine: played once, on SQLite (the scoring
    # tables are the same on PostgreSQL, which tests/scoring covers for every game).
    database_url = f"sqlite:///{tmp_path / 'navegador.db'}"
    async with running_lobby(
        redis_url, keys, database_url, tmp_path, bot_think_ms="20", **SEATS_FROM_ONE_ADDRESS
    ) as client:
        seats = {first_game: {"0": "human", "1": "bot:random"}}  # Navegador's bots: greedy
        await play_games(redis, keys, [(first_game, 2, 5, None)], seats, engine=False)
        aod_board = await _eventually(client, "/leaderboard", lambda board: len(board) == 2)

        body = {
            "game": GAME,
            "seats": 4,
            "bots": {"1": "greedy", "3": "greedy"},
            "deadline_s": DEADLINE_S,
        }
        created = await client.post("/tables", json=body)
        assert created.status_code == 201, created.json()
        table = created.json()
        assert (table["game"], table["ruleset"]) == (GAME, "standard")
        tokens = {}
        for name in ("Ana", "Bo"):
            joined = await client.post(f"/tables/{table['id']}/join", json={"name": name})
            assert joined.status_code == 201, joined.json()
            tokens[joined.json()["seat"]] = joined.json()["token"]
        assert sorted(tokens) == [0, 2]
        started = await client.post(f"/tables/{table['id']}/start", headers=bearer(tokens[0]))
        assert started.status_code == 200, started.json()
        base = f"ws://{client.base_url.host}:{client.base_url.port}/games/{table['id']}/ws"
        rng = random.Random(12)
        async with asyncio.TaskGroup() as humans:  # one failing cancels the other at once
            ana, bo = (
                humans.create_task(_human(client, f"{base}?token={t}", table["id"], t, rng))
                for _, t in sorted(tokens.items())
            )
        (streamed, moves), (_, other_moves) = ana.result(), bo.result()
        last = {"after_version": streamed[-1]["version"]}  # the views follow the log
        final = (await client.get(f"/games/{table['id']}/view", params=last)).json()
        result = await _eventually(client, f"/games/{table['id']}/result", lambda r: True)
        standings = (await client.get(f"/games/{table['id']}/standings")).json()
        board = await _eventually(
            client, f"/leaderboard?game={GAME}", lambda b: sum(r["games"] for r in b) >= 3
        )
        aod_after = (await client.get("/leaderboard", params={"game": api.DEFAULT_GAME})).json()
        summary = (await client.get("/analytics/summary")).json()
        page = await client.get("/analytics")
        metrics = await _eventually(client, "/metrics", lambda _: True)

    log = await EventStore(redis, keys).read(table["id"])
    game = api.get(GAME)
    rules_log = [to_event(e) for e in log]
    state = game.replay(rules_log)
    assert game.is_over(state) and final["stage"] == "over" and min(moves, other_moves) > 10

    # Live: seat 0's socket got every event it may see, once, in order, and its turns.
    events = [m for m in streamed if m["type"] != "decision"]
    decisions = [m for m in streamed if m["type"] == "decision"]
    assert [e["version"] for e in events] == [e.version for e in log if e.visible_to(0)]
    assert events[-1]["type"] == "game_ended" and all(e["secret"] is None for e in events)
    assert decisions and all(d["seat"] == 0 and d["legal_commands"] for d in decisions)

    # Standings and result: the rules' score of the log.
    expected = game.results(state)
    assert result["game"] == standings["game"] == GAME and standings["status"] == "finished"
    assert [(r["seat"], r["total"], r["place"], r["breakdown"]) for r in result["results"]] == [
        (r.seat, r.total, r.place, r.breakdown) for r in expected
    ]
    assert [r["seat_kind"] for r in result["results"]] == [
        "human",
        "bot:greedy",
        "human",
        "bot:greedy",
    ]
    assert [s["total"] for s in standings["standings"]] == [r.total for r in expected]

    # Facts: the game's facts hook over the log, counted per seat.
    replay = game.initial(rules_log[0])
    counted: dict[int, Counter[str]] = {seat: Counter() for seat in range(4)}
    for event in rules_log:
        game.apply(replay, event)
        for fact in game.facts(replay, event):
            counted[fact.seat][fact.kind] += 1
    assert {kind for c in counted.values() for kind in c} <= FACT_KINDS
    assert (
        sum(counted.values(), Counter())["privilege"]
        + sum(counted.values(), Counter())["building_bought"]
        > 0
    )
    assert [r["facts"] for r in result["results"]] == [dict(counted[s]) for s in range(4)]

    # Ratings of its own: the humans and the bot level on Navegador's board only.
    assert {r["player"] for r in board} == {"player:Ana", "player:Bo", "bot:greedy"}
    assert sum(r["wins"] for r in board) >= 1
    assert aod_after == aod_board
    assert not {r["player"] for r in aod_after} & {"player:Ana", "player:Bo", "bot:greedy"}

    # The dashboard's summary has a Navegador section with its facts.
    section = summary["games"][GAME]
    assert section["games_finished"] == 1 and set(summary["games"]) == {api.DEFAULT_GAME, GAME}
    assert set(section["mean_breakdown"]) == {*expected[0].breakdown, "total"}
    assert set(section["win_rate_by_side"]) == set(state.names)
    totals = sum(counted.values(), Counter())
    assert {k: sum(s["count"] for s in v) for k, v in section["facts"].items()} == dict(totals)
    assert page.status_code == 200 and "/static/js/analytics.js" in page.text

    # Metrics labelled by game: one game of each started and ended, each game's own commands.
    both = {api.DEFAULT_GAME: 1.0, GAME: 1.0}
    assert _by_game(metrics, "caravel_games_started") == both
    assert _by_game(metrics, "caravel_games_ended") == both
    assert _by_game(metrics, "caravel_game_commands")[GAME] == len({e.causation_id for e in log})
    assert _by_game(metrics, "caravel_bot_decisions")[GAME] >= len(log) // 10


async def test_a_lone_navegador_player_in_the_queue_is_given_bots(
    redis: Redis, redis_url: str, keys: Keys, database_url: str, tmp_path: Path
) -> None:
    """A player queued for Navegador alone gets a Navegador table whose free seats bots
    take; the game starts and moves on when a bot is to decide."""
    async with running_lobby(redis_url, keys, database_url, tmp_path, match_wait_s="0.2") as client:
        queued = await client.post("/queue", json={"game": GAME, "name": "solo", "players": 3})
        assert queued.status_code == 202, queued.json()
        for _ in range(600):
            ticket = (await client.get(f"/queue/{queued.json()['ticket']}")).json()
            if ticket["status"] == "matched":
                break
            await asyncio.sleep(0.02)
        assert ticket["status"] == "matched"
        table = (await client.get(f"/tables/{ticket['table_id']}")).json()
        assert table["game"] == GAME and table["status"] == "running"
        assert sorted(s["kind"] for s in table["taken"]) == ["bot", "bot", "human"]
        view = await wait_for_view(client, table["id"], ticket["token"], 1)
        # On a slow machine the human's deadline may pass: a fallback bot then plays its seat,
        # and the bots may play the game to its end while this loop waits for a view.
        while view["stage"] != "over" and _decider(view) == ticket["seat"]:
            answer = await client.post(
                f"/games/{table['id']}/commands",
                json=view["legal_commands"][0],
                headers=bearer(ticket["token"]),
            )
            assert answer.status_code == 200, answer.json()
            view = await wait_for_view(
                client, table["id"], ticket["token"], answer.json()["version"]
            )
        if view["stage"] != "over":  # a bot is to decide: the game moves on
            later = await wait_for_view(client, table["id"], ticket["token"], view["version"] + 1)
            assert later["game"] == GAME and later["version"] > view["version"]
    log = await EventStore(redis, keys).read(table["id"])
    assert log[0].data["game"] == GAME and len(log[0].data["players"]) == 3
    assert any(e.actor == "bot" for e in log)  # the seats the bots took were played


def _decider(view: dict[str, Any]) -> int:
    """The seat to decide in a running game's view (a failure shows the view otherwise)."""
    assert view["pending"], f"nobody decides at version {view['version']}: {view}"
    return int(view["pending"][0]["seat"])


def _by_game(text: str, family: str) -> dict[str, float]:
    """One per-game counter of a Prometheus scrape: its value per ``game`` label."""
    return {
        sample.labels["game"]: sample.value
        for found in text_string_to_metric_families(text)
        if found.name == family
        for sample in found.samples
        if sample.name.endswith("_total")
    }
