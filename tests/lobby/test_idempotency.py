"""Idempotency-Key over real HTTP (`caravel up`): a repeated key from the same client gets
the first answer and makes nothing twice (a double click, a retry after a lost answer), also
when the repeats come at once; the same key with another request is refused."""

from __future__ import annotations

import asyncio
import socket
import threading
from pathlib import Path
from typing import Any

import pytest
from redis.asyncio import Redis

from services.lobby import idempotency
from services.lobby.idempotency import IdempotencyMiddleware
from shared.bus import Keys, connect

from .helpers import bearer, running_lobby

ONCE = {"Idempotency-Key": "create-1"}
TABLE = {"seats": 2, "bots": {"1": "greedy"}}
SECRET = b"test-secret"


async def test_a_repeated_key_answers_the_first_result_and_makes_one_table(
    redis: Redis, redis_url: str, keys: Keys, database_url: str, tmp_path: Path
) -> None:
    async with running_lobby(redis_url, keys, database_url, tmp_path) as client:
        first = await client.post("/tables", json=TABLE, headers=ONCE)
        again = await client.post("/tables", json=TABLE, headers=ONCE)
        assert (first.status_code, again.status_code) == (201, 201)
        assert again.json() == first.json()
        assert again.headers["idempotent-replayed"] == "true"
        assert "idempotent-replayed" not in first.headers
        other = await client.post("/tables", json=TABLE, headers={"Idempotency-Key": "create-2"})
        unkeyed = await client.post("/tables", json=TABLE)
        ids = {first.json()["id"], other.json()["id"], unkeyed.json()["id"]}
        assert len(ids) == 3
        listed = {t["id"] for t in (await client.get("/tables")).json()}
        assert listed == ids

        # Join and start: the repeat gets the same seat and token, the game starts once.
        table = first.json()["id"]
        join = {"Idempotency-Key": "join-1"}
        ana = {"name": "Ana"}
        joined = [
            await client.post(f"/tables/{table}/join", json=ana, headers=join) for _ in range(2)
        ]
        assert [j.status_code for j in joined] == [201, 201]
        assert joined[0].json() == joined[1].json()
        token = joined[0].json()["token"]
        start = {"Idempotency-Key": "start-1", **bearer(token)}
        started = [await client.post(f"/tables/{table}/start", headers=start) for _ in range(2)]
        assert [s.status_code for s in started] == [200, 200]
        assert started[1].json() == started[0].json()
        plain = await client.post(f"/tables/{table}/start", headers=bearer(token))
        assert plain.status_code == 409 and plain.json()["code"] == "table_not_open"
        # A keyed start whose first answer was a 5xx (never kept: the chaos benchmark's
        # "wrongly refused" starts) reaches the route again: it answers the running table.
        view = (await client.get(f"/games/{table}/view", headers=bearer(token))).json()
        lost = {"Idempotency-Key": "start-after-a-503", **bearer(token)}
        repeat = await client.post(f"/tables/{table}/start", headers=lost)
        assert repeat.status_code == 200, repeat.text
        assert repeat.json() == started[0].json()
        again = (await client.get(f"/games/{table}/view", headers=bearer(token))).json()
        assert again["version"] == view["version"]  # no second game, nothing appended


async def test_repeats_sent_at_once_make_one_table_and_share_its_answer(
    redis: Redis, redis_url: str, keys: Keys, database_url: str, tmp_path: Path
) -> None:
    """Eight copies of one request at the same moment (the first still running while the
    others arrive): one table, and all eight answers are its."""
    async with running_lobby(redis_url, keys, database_url, tmp_path) as client:
        bots = {"seats": 2, "bots": {"0": "random", "1": "random"}}  # starts: a slow answer
        answers = await asyncio.gather(
            *(client.post("/tables", json=bots, headers=ONCE) for _ in range(8))
        )
        assert {a.status_code for a in answers} == {201}
        assert len({a.json()["id"] for a in answers}) == 1
        running = await client.get("/tables", params={"status": "running"})
        finished = await client.get("/tables", params={"status": "finished"})
        assert len(running.json()) + len(finished.json()) == 1


async def test_a_key_sent_with_another_request_or_malformed_is_refused(
    redis: Redis, redis_url: str, keys: Keys, database_url: str, tmp_path: Path
) -> None:
    async with running_lobby(redis_url, keys, database_url, tmp_path) as client:
        assert (await client.post("/tables", json=TABLE, headers=ONCE)).status_code == 201
        other = await client.post("/tables", json={**TABLE, "seats": 3}, headers=ONCE)
        assert other.status_code == 422 and other.json()["code"] == "idempotency_key_reused"
        queued = await client.post("/queue", json={"name": "Bo", "players": 2}, headers=ONCE)
        assert queued.json()["code"] == "idempotency_key_reused"  # another path, same key
        bad = await client.post("/tables", json=TABLE, headers={"Idempotency-Key": "a b"})
        assert bad.status_code == 422 and bad.json()["code"] == "bad_idempotency_key"
        assert len((await client.get("/tables")).json()) == 1
        # A refusal is an answer too: its repeat gets it again, and nothing is made.
        wrong = {"seats": 2, "bots": {"5": "greedy"}}
        refused = [
            await client.post("/tables", json=wrong, headers={"Idempotency-Key": "w"})
            for _ in range(2)
        ]
        assert [r.status_code for r in refused] == [422, 422]
        assert refused[0].json() == refused[1].json()


async def test_a_join_whose_kept_answer_was_lost_answers_its_seat_again(
    redis: Redis, redis_url: str, keys: Keys, database_url: str, tmp_path: Path
) -> None:
    """The chaos benchmark's "wrongly refused" join (issue 25): the join took its seat but
    its answer was kept nowhere (the lobby killed before it kept it, or Redis failing as it
    did), so the client's repeat ran the join again and was refused ``name_taken``. Here the
    kept answer is deleted after the first join: the repeat answers the seat the first one
    took, with a token that holds it; another key is still a second join, refused."""
    async with running_lobby(redis_url, keys, database_url, tmp_path) as client:
        table = (await client.post("/tables", json=TABLE)).json()["id"]
        once = {"Idempotency-Key": "join-lost"}
        first = await client.post(f"/tables/{table}/join", json={"name": "Ana"}, headers=once)
        assert first.status_code == 201, first.text
        slots = [k async for k in redis.scan_iter(f"{keys.prefix}:*:idempotency:*:join-lost")]
        assert len(slots) == 1
        await redis.delete(*slots)  # the first answer, kept nowhere
        repeat = await client.post(f"/tables/{table}/join", json={"name": "Ana"}, headers=once)
        assert repeat.status_code == 201, repeat.text
        assert "idempotent-replayed" not in repeat.headers  # answered by the route itself
        assert repeat.json()["seat"] == first.json()["seat"]
        other = {"Idempotency-Key": "join-other"}
        again = await client.post(f"/tables/{table}/join", json={"name": "Ana"}, headers=other)
        assert again.status_code == 409 and again.json()["code"] == "name_taken"
        started = await client.post(
            f"/tables/{table}/start", headers=bearer(repeat.json()["token"])
        )
        assert started.status_code == 200, started.text  # the repeat's token holds the seat
        taken = (await client.get(f"/tables/{table}")).json()["taken"]
        assert [s["name"] for s in taken if s["kind"] == "human"] == ["Ana"]  # one seat


async def test_a_create_whose_kept_answer_was_lost_answers_its_table_again(
    redis: Redis, redis_url: str, keys: Keys, database_url: str, tmp_path: Path
) -> None:
    """A keyed create whose answer was kept nowhere (the lobby killed before it kept it, or
    Redis failing as it did): the client's repeat made a second table before. A keyed
    create names its table from the key now: the repeat answers the table the first one
    made, and lists one table; the same key with another table after the kept answer is
    gone is refused, and makes nothing. The kept answer lies in the table's partition."""
    async with running_lobby(redis_url, keys, database_url, tmp_path) as client:
        once = {"Idempotency-Key": "create-lost"}
        first = await client.post("/tables", json=TABLE, headers=once)
        assert first.status_code == 201, first.text
        table = first.json()["id"]
        slots = [k async for k in redis.scan_iter(f"{keys.prefix}:*:idempotency:*:create-lost")]
        assert [k.decode() for k in slots] == [
            keys.idempotency(keys.partition(table), "127.0.0.1", "create-lost")
        ]
        await redis.delete(*slots)  # the first answer, kept nowhere
        repeat = await client.post("/tables", json=TABLE, headers=once)
        assert repeat.status_code == 201, repeat.text
        assert "idempotent-replayed" not in repeat.headers  # answered by the route itself
        assert repeat.json() == first.json()
        await redis.delete(*slots)
        other = {"seats": 3, "bots": {"1": "greedy"}}
        reused = await client.post("/tables", json=other, headers=once)
        assert reused.status_code == 422 and reused.json()["code"] == "idempotency_key_reused"
        assert [t["id"] for t in (await client.get("/tables")).json()] == [table]


async def test_a_keyed_request_is_refused_503_while_redis_does_not_answer() -> None:
    """With Redis away the key cannot be checked: the request let through unguarded made a
    seat or a table whose answer was kept nowhere, and its repeat made another. It is a 503
    with ``Retry-After`` now, and the route does not run (a Redis nobody listens on)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing answers there
    away = connect(f"redis://127.0.0.1:{port}/0")
    ran: list[Any] = []
    answered: list[Any] = []

    async def route(scope: Any, receive: Any, send: Any) -> None:
        ran.append(scope["path"])

    async def sent(message: Any) -> None:
        answered.append(message)

    scope = _keyed_post("/tables/t-1/join", b"k-away")
    try:
        middleware = IdempotencyMiddleware(route, away, Keys("cv-away", 4), SECRET)
        await middleware(scope, _receiving(b'{"name": "Ana"}'), sent)
    finally:
        await away.aclose()
    assert ran == []
    assert answered[0]["status"] == 503
    assert (b"retry-after", b"1") in answered[0]["headers"]
    assert b"redis_unavailable" in answered[1]["body"]


async def test_a_waiting_player_cancels_their_ticket(
    redis: Redis, redis_url: str, keys: Keys, database_url: str, tmp_path: Path
) -> None:
    """DELETE /queue/{ticket}: gone (404 after); a matched ticket stays (409 naming the
    table) and an unknown one is 404."""
    lobby = running_lobby(redis_url, keys, database_url, tmp_path, match_wait_s="3600")
    async with lobby as client:
        ticket = (await client.post("/queue", json={"name": "Cy", "players": 2})).json()["ticket"]
        assert (await client.delete(f"/queue/{ticket}")).status_code == 204
        gone = await client.get(f"/queue/{ticket}")
        assert gone.status_code == 404 and gone.json()["code"] == "unknown_ticket"
        assert (await client.delete(f"/queue/{ticket}")).status_code == 404
        pair = [
            (await client.post("/queue", json={"name": n, "players": 2})).json()["ticket"]
            for n in ("Di", "Ed")
        ]
        for _ in range(600):
            status = (await client.get(f"/queue/{pair[0]}")).json()
            if status["status"] == "matched":
                break
            await asyncio.sleep(0.02)
        late = await client.delete(f"/queue/{pair[0]}")
        assert late.status_code == 409 and late.json()["code"] == "ticket_matched"
        assert late.json()["details"]["table_id"] == status["table_id"]


async def test_a_repeat_runs_again_when_the_first_requests_lobby_died(
    redis_url: str, keys: Keys, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A lobby killed in the middle of a keyed request (the chaos benchmark's lobby kills)
    left its slot pending for a day: every repeat, at any lobby, waited and was answered 409
    ``idempotency_pending`` (starts and new tables never answered). The first request runs
    here in an event loop of its own, stopped while the request runs: none of its code runs
    again, as after a ``kill -9``. A repeat at another lobby runs the request itself once
    the dead one's slot has run out."""
    monkeypatch.setattr(idempotency, "PENDING_S", 0.5)
    body = b'{"seats": 2}'
    scope = _keyed_post("/tables", b"dies-1")
    running = threading.Event()

    async def hangs(scope: Any, receive: Any, send: Any) -> None:
        running.set()
        await asyncio.Event().wait()  # the process dies in here

    dead = asyncio.new_event_loop()
    dying = connect(redis_url)
    first = dead.create_task(
        IdempotencyMiddleware(hangs, dying, keys, SECRET)(scope, _receiving(body), _ignored)
    )
    thread = threading.Thread(target=dead.run_forever)
    thread.start()
    try:
        assert await asyncio.to_thread(running.wait, 30)
        dead.call_soon_threadsafe(dead.stop)  # the lobby dies: nothing of it runs again
        thread.join()
        assert not first.done()
        answered: list[Any] = []

        async def made(scope: Any, receive: Any, send: Any) -> None:
            await send({"type": "http.response.start", "status": 201, "headers": []})
            await send({"type": "http.response.body", "body": b"{}"})

        async def sent(message: Any) -> None:
            answered.append(message)

        repeat = connect(redis_url)
        try:
            await IdempotencyMiddleware(made, repeat, keys, SECRET)(scope, _receiving(body), sent)
        finally:
            await repeat.aclose()
        assert answered[0]["status"] == 201
    finally:
        thread.join()
        _DEAD.append((dead, first, dying))  # left as a killed process leaves them, uncollected


_DEAD: list[Any] = []


def _keyed_post(path: str, key: bytes) -> dict[str, Any]:
    """The ASGI scope of a POST to ``path`` with an Idempotency-Key, from one client."""
    return {
        "type": "http",
        "method": "POST",
        "path": path,
        "headers": [(b"idempotency-key", key)],
        "client": ("10.0.0.1", 1234),
    }


def _receiving(body: bytes) -> Any:
    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": body, "more_body": False}

    return receive


async def _ignored(message: Any) -> None:
    return None
