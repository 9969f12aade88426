"""The lobby's limits over real HTTP and WebSockets: request bodies and frames are bounded,
and joins, commands and sockets per client are rate limited (429 with Retry-After)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import structlog
import websockets
from redis.asyncio import Redis
from websockets.asyncio.client import ClientConnection

from services.lobby import limits
from shared.bus import Keys, connect
from shared.settings import Settings

from .helpers import bearer, free_port, running_lobby

MEGABYTE = 1_000_000
PAD = "caravel-padding-" * (MEGABYTE // 16)  # findable in Redis, were it ever stored


async def _chunked(body: bytes) -> AsyncIterator[bytes]:
    """A body sent chunked (no Content-Length): the server sees its size only as it reads."""
    for start in range(0, len(body), 16_384):
        yield body[start : start + 16_384]


async def _close_of(ws: ClientConnection) -> tuple[int | None, str]:
    """How the server closes ``ws`` by itself ((None, "open") if not within 20 s)."""

    async def drained() -> None:
        with contextlib.suppress(websockets.ConnectionClosed):
            async for _ in ws:
                pass

    try:
        await asyncio.wait_for(drained(), 20)
    except TimeoutError:
        return (None, "open")
    return (ws.close_code, ws.close_reason or "")


def _refused(response: httpx.Response, status: int, code: str) -> dict[str, Any]:
    assert response.status_code == status, response.text[:300]
    error: dict[str, Any] = response.json()
    assert set(error) == {"code", "message", "details"} and error["code"] == code, error
    return error


async def _started_table(client: httpx.AsyncClient) -> tuple[str, str]:
    """A running game of one human (whose token is returned) and a bot, no deadline soon."""
    body = {"seats": 2, "bots": {"1": "greedy"}, "deadline_s": 3600}
    table = (await client.post("/tables", json=body)).json()
    me = (await client.post(f"/tables/{table['id']}/join", json={"name": "A"})).json()
    started = await client.post(f"/tables/{table['id']}/start", headers=bearer(me["token"]))
    assert started.is_success, started.text
    return table["id"], me["token"]


async def test_large_bodies_and_frames_are_refused_and_change_nothing(
    redis: Redis, redis_url: str, keys: Keys, database_url: str, tmp_path: Path
) -> None:
    """A 1 MB POST /tables gets 413 payload_too_large (with a Content-Length, and chunked)
    and makes no table; a 1 MB command gets 413 and never reaches Redis; a 1 MB WebSocket
    frame closes the socket (1009, message too big)."""
    async with running_lobby(redis_url, keys, database_url, tmp_path) as client:
        big_table = {"seats": 2, "options": {"pad": PAD}}
        sized = await client.post("/tables", json=big_table)
        chunked = await client.post(
            "/tables",
            content=_chunked(f'{{"seats": 2, "name": "{PAD}"}}'.encode()),
            headers={"content-type": "application/json"},
        )
        tables = (await client.get("/tables")).json()
        game_id, token = await _started_table(client)
        big_command = await client.post(
            f"/games/{game_id}/commands",
            json={"type": "place", "unit": "colonist", "box": "dock", "pad": PAD},
            headers=bearer(token),
        )
        url = f"ws://{client.base_url.host}:{client.base_url.port}/games/{game_id}/ws"
        async with websockets.connect(url, max_size=None) as ws:
            await ws.send(PAD)
            frame_close = (await _close_of(ws))[0]
        small = await client.post("/tables", json={"seats": 2})  # the lobby still serves
    error = _refused(sized, 413, "payload_too_large")
    assert "65536 bytes" in error["message"]
    _refused(chunked, 413, "payload_too_large")
    assert tables == []  # neither refused body made a table
    _refused(big_command, 413, "payload_too_large")
    stored: Any = await redis.xrange(keys.commands(keys.partition(game_id)))
    assert stored  # the game's commands are there: the refused one is not among them
    assert all(b"caravel-padding-" not in b"".join(fields.values()) for _, fields in stored)
    assert frame_close == 1009
    assert small.is_success


async def test_a_chunked_command_past_the_limit_in_its_last_chunk_gets_413(
    redis_url: str, keys: Keys, database_url: str, tmp_path: Path
) -> None:
    """A move's body sent chunked whose last chunk passes CARAVEL_MAX_BODY_BYTES gets 413
    at once: the move's route does not read the body a second time (that read waited for a
    chunk that never comes, and the client for its answer)."""
    async with running_lobby(redis_url, keys, database_url, tmp_path) as client:
        game_id, token = await _started_table(client)
        pad = "p" * 64 * 1024
        body = f'{{"type": "place", "unit": "colonist", "box": "dock", "pad": "{pad}"}}'.encode()

        async def two_chunks() -> AsyncIterator[bytes]:
            yield body[:60_000]
            await asyncio.sleep(0.2)  # read apart: the route's first read ends at the first
            yield body[60_000:]  # the last chunk: past 65,536 bytes

        answer = await client.post(
            f"/games/{game_id}/commands?legal=true",
            content=two_chunks(),
            headers={**bearer(token), "content-type": "application/json"},
            timeout=10,
        )
    _refused(answer, 413, "payload_too_large")


async def test_bursts_past_a_clients_rates_get_429_with_retry_after_then_are_served(
    redis: Redis, redis_url: str, keys: Keys, database_url: str, tmp_path: Path
) -> None:
    """With tiny rates, one join, command or socket past the burst is refused: 429
    rate_limited with Retry-After (4429 for a socket), and nothing is made; after waiting
    what Retry-After says, the client is served again."""
    rates = {
        "join_rate": "0.5",
        "join_burst": "2",
        "command_rate": "0.5",
        "command_burst": "1",
        "socket_rate": "0.5",
        "socket_burst": "1",
    }
    async with running_lobby(redis_url, keys, database_url, tmp_path, **rates) as client:
        game_id, token = await _started_table(client)  # two joins: a table and a seat
        too_many_tables = await client.post("/tables", json={"seats": 2})
        tables_after_refusal = [
            len((await client.get(f"/tables?status={status}")).json())
            for status in ("open", "running")
        ]
        move = {"type": "no_such_command"}
        path = f"/games/{game_id}/commands"
        first_move = await client.post(path, json=move, headers=bearer(token))
        too_many_moves = await client.post(
            f"/games/{game_id}/commands", json=move, headers=bearer(token)
        )
        url = f"ws://{client.base_url.host}:{client.base_url.port}/games/{game_id}/ws"
        async with websockets.connect(url) as held:
            await held.recv()  # the first socket streams
            async with websockets.connect(url) as second:
                socket_refusal = await _close_of(second)
        await asyncio.sleep(int(too_many_tables.headers["Retry-After"]))
        table_again = await client.post("/tables", json={"seats": 2})
        await asyncio.sleep(int(too_many_moves.headers["Retry-After"]))
        move_again = await client.post(
            f"/games/{game_id}/commands", json=move, headers=bearer(token)
        )
    error = _refused(too_many_tables, 429, "rate_limited")
    assert int(too_many_tables.headers["Retry-After"]) >= 1
    assert error["details"]["retry_after_s"] == int(too_many_tables.headers["Retry-After"])
    assert tables_after_refusal == [0, 1]  # the refused one made nothing
    assert first_move.status_code != 429
    _refused(too_many_moves, 429, "rate_limited")
    assert socket_refusal[0] == 4429 and socket_refusal[1].startswith("rate_limited")
    assert table_again.is_success
    assert move_again.status_code not in (429, 500)


async def test_moves_refused_for_their_token_or_seat_draw_on_the_rate_too(
    redis: Redis, redis_url: str, keys: Keys, database_url: str, tmp_path: Path
) -> None:
    """A move's rate is taken by its route (with its seat's check and its send, in one
    round trip), not before the route: a flood of moves with a forged token still runs out
    of the client's tokens (429, not 401 forever), and once out, a real seat's move is
    refused for its rate before its seat is looked at (nothing sent)."""
    rates = {"command_rate": "0.2", "command_burst": "2", "join_rate": "100", "join_burst": "100"}
    async with running_lobby(redis_url, keys, database_url, tmp_path, **rates) as client:
        game_id, token = await _started_table(client)
        path, move = f"/games/{game_id}/commands", {"type": "no_such_command"}
        forged = {"Authorization": "Bearer " + token[:-2] + ("AA" if token[-2:] != "AA" else "BB")}
        answers = [await client.post(path, json=move, headers=forged) for _ in range(3)]
        real = await client.post(path, json=move, headers=bearer(token))
    assert [a.status_code for a in answers[:2]] == [401, 401]
    _refused(answers[2], 429, "rate_limited")
    _refused(real, 429, "rate_limited")
    assert int(real.headers["Retry-After"]) >= 1


async def test_requests_let_through_unchecked_are_logged_once_every_few_seconds_with_a_count(
    keys: Keys,
) -> None:
    """A lobby whose Redis does not answer lets every request through unchecked, and logged
    one line for each (454 lines in a 3,000-table run): now one line at most every
    ``UNCHECKED_LOG_S``, which counts the requests let through since the line before."""
    client = connect(f"redis://127.0.0.1:{free_port()}")  # no one there: refused
    bucket_limits = limits.Limits(client, keys, Settings())

    def lines() -> list[Any]:
        return [line.get("unchecked") for line in logs if "not checked" in line["event"]]

    try:
        with structlog.testing.capture_logs() as logs:
            for n in range(50):  # a bucket each: each asks Redis, and is let through
                await bucket_limits.take("joins", f"10.0.0.{n}")
            assert lines() == [1]
            bucket_limits._unchecked.last -= limits.UNCHECKED_LOG_S  # as if that long after
            await bucket_limits.take("joins", "10.0.1.0")
            assert lines() == [1, 50]  # the 49 let through unlogged, and this one
    finally:
        await client.aclose()
