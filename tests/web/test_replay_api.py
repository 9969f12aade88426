"""GET /games/{id}/replay/view over real HTTP against `caravel up`: a finished game's public
view at any version, as the replay page steps through it; refused for a game still running
(a replay must not become a way to watch a live game's hidden state) and for versions it
does not have; never a hidden value."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
from redis.asyncio import Redis

from shared.bus import Keys
from shared.eventstore import EventStore
from shared.eventstore.codec import to_event
from tests.games.test_protocol import assert_nothing_secret_in, secret_values
from tests.lobby.helpers import bearer, running_lobby, wait_for_view

from .helpers import eventually, public_view_at


async def test_replay_view_is_the_public_view_of_a_finished_game_at_each_version(
    redis_url: str, keys: Keys, redis: Redis, tmp_path: Path
) -> None:
    database = f"sqlite:///{tmp_path / 'lobby.db'}"
    async with running_lobby(redis_url, keys, database, tmp_path / "data") as client:
        bots = {"0": "greedy", "1": "random"}  # two seats: a short game
        table = (await client.post("/tables", json={"seats": 2, "bots": bots})).json()
        game_id = table["id"]

        await assert_pages_beside_the_api(client, game_id)

        # A game that waits on a human seat: the bots' game above may be over by now.
        held = (await client.post("/tables", json={"seats": 2, "bots": {"1": "random"}})).json()
        me = (await client.post(f"/tables/{held['id']}/join", json={"name": "Ana"})).json()
        await client.post(f"/tables/{held['id']}/start", headers=bearer(me["token"]))
        await wait_for_view(client, held["id"], me["token"], 1)
        running = await client.get(f"/games/{held['id']}/replay/view")
        assert running.status_code == 409, running.text
        assert running.json()["code"] == "game_not_finished"
        unknown = await client.get("/games/g-nothing-here/replay/view")
        assert (unknown.status_code, unknown.json()["code"]) == (404, "unknown_game")

        async def finished() -> bool:
            view = await client.get(f"/games/{game_id}/view")
            return view.status_code == 200 and view.json()["phase"] == "over"

        await eventually(finished, timeout_s=120)
        log = await EventStore(redis, keys).read(game_id)
        last = log[-1].version
        hidden = secret_values([to_event(e) for e in log])
        assert hidden, "the game's log has secret values: the leak check below can fail"

        past = await client.get(f"/games/{game_id}/replay/view", params={"version": last + 1})
        assert (past.status_code, past.json()["code"]) == (409, "bad_version")
        zero = await client.get(f"/games/{game_id}/replay/view", params={"version": 0})
        assert zero.status_code == 422

        for version in sorted({1, 2, last, *range(3, last, 5)}):
            answer = await client.get(f"/games/{game_id}/replay/view", params={"version": version})
            assert answer.status_code == 200, answer.text
            body = answer.json()
            assert body["version"] == version and body["last_version"] == last
            assert body["view"] == public_view_at(log, version), version
            event = log[version - 1]
            expected = json.loads(event.encode().public) if event.visible_to(None) else None
            assert body["event"] == expected
            assert body["event"] is None or body["event"]["secret"] is None
            assert "legal_commands" not in body["view"] and body["view"]["seat"] is None
            assert_nothing_secret_in(body, hidden, f"the replay view at {version}")

        end = (await client.get(f"/games/{game_id}/replay/view")).json()
        assert end["version"] == last
        assert end["view"] == (await client.get(f"/games/{game_id}/view")).json()


async def assert_pages_beside_the_api(client: httpx.AsyncClient, table_id: str) -> None:
    """A browser asking for /tables/{id} gets the page, any other client the table's JSON;
    the pages are not in the OpenAPI document, the replay view is; the scripts are served."""
    html = {"Accept": "text/html,application/xhtml+xml,*/*;q=0.8"}
    page = await client.get(f"/tables/{table_id}", headers=html)
    assert page.headers["content-type"].startswith("text/html")
    assert 'data-page="table"' in page.text
    for accept in ("*/*", "application/json"):
        table = await client.get(f"/tables/{table_id}", headers={"Accept": accept})
        assert table.json()["id"] == table_id
    assert 'data-page="home"' in (await client.get("/")).text
    assert 'data-page="replay"' in (await client.get(f"/games/{table_id}/replay")).text
    script = await client.get("/static/js/app.js")
    assert script.status_code == 200 and "javascript" in script.headers["content-type"]
    paths = (await client.get("/openapi.json")).json()["paths"]
    assert "/games/{game_id}/replay/view" in paths
    assert not {"/", "/games/{game_id}/replay"} & set(paths)
