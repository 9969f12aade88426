"""The chaos benchmark's players: human-like clients over HTTP and tables of bots.

A human opens a two-seat table (the other seat a random bot), joins, starts it and plays it
to its end: it reads its legal commands (never older than its last answer), thinks a little,
and sends one under a command id of its own, sending the same request again after a 503, a
lost connection or a timeout until it gets an answer (200, or a refusal). Every answer is
written down (:class:`Tally`), for the checks to hold against the logs. Bot tables are
opened (they start at once) and watched until their game is over.
"""

from __future__ import annotations

import asyncio
import random
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import httpx

from .chaos_timings import Timed, route_of

GAME = "age_of_discovery"
GIVE_UP_S = 180.0  # a request unanswered this long is given up (counted, never hidden)


@dataclass(frozen=True)
class Acked:
    game: str
    command_id: str
    version: int
    status: str  # accepted | duplicate


@dataclass(frozen=True)
class Refused:
    game: str
    command_id: str
    legal_version: int  # the version its /legal answer was at
    status: int
    code: str
    detail: str = ""  # the refusal's reason and the command sent: a wrong one explains itself


@dataclass
class Tally:
    """Everything the clients were answered."""

    acked: list[Acked] = field(default_factory=list)
    refused: list[Refused] = field(default_factory=list)
    setup_refused: list[str] = field(default_factory=list)  # our own table refused us
    unanswered: list[tuple[str, str]] = field(default_factory=list)  # (game, command id)
    sent: dict[str, set[str]] = field(default_factory=dict)  # game -> command ids sent
    games: list[str] = field(default_factory=list)  # every table opened (id = game id)
    bot_games: set[str] = field(default_factory=set)  # the tables of bots among them
    started: set[str] = field(default_factory=set)  # tables whose start was answered
    requests: int = 0
    server_errors: list[str] = field(default_factory=list)  # 5xx but 503: "500 GET /path ..."
    unavailable: int = 0  # 503s (allowed: the client comes back after Retry-After)
    transport_errors: int = 0
    # Every request timed (``--timings``; None: not kept): ``chaos_timings.Timed``.
    timed: list[Any] | None = None


class Http:
    """One client's requests: each sent again, as is, until it has an answer that is not a
    503, a 429, a lost connection or a 5xx (every 5xx but 503 is written down)."""

    def __init__(self, client: httpx.AsyncClient, tally: Tally) -> None:
        self.client = client
        self.tally = tally

    async def call(
        self, method: str, path: str, body: Any = None, headers: dict[str, str] | None = None
    ) -> httpx.Response | None:
        give_up = time.monotonic() + GIVE_UP_S
        pause = 0.05
        while time.monotonic() < give_up:
            self.tally.requests += 1
            sent = time.time()
            try:
                answer = await self.client.request(method, path, json=body, headers=headers)
            except (httpx.TransportError, httpx.TimeoutException):
                self._time(sent, method, path, None)
                self.tally.transport_errors += 1
                await asyncio.sleep(pause)
                pause = min(1.0, pause * 2)
                continue
            self._time(sent, method, path, answer)
            if answer.status_code == 503 or answer.status_code == 429:
                self.tally.unavailable += answer.status_code == 503
                after = float(answer.headers.get("retry-after", "1"))
                await asyncio.sleep(min(after, 1.0) * random.uniform(0.5, 1.0))
                continue
            if answer.status_code >= 500:
                text = answer.text[:300].replace("\n", " ")
                self.tally.server_errors.append(f"{answer.status_code} {method} {path} {text}")
                await asyncio.sleep(0.5)
                continue
            if answer.status_code == 409 and _code(answer) == "idempotency_pending":
                await asyncio.sleep(0.2)
                continue
            return answer
        return None

    def _time(self, sent: float, method: str, path: str, answer: httpx.Response | None) -> None:
        """Keep the request's time (``--timings``): a table's creation under the id it
        was given."""
        if self.tally.timed is None:
            return
        route, game = route_of(path)
        made = method == "POST" and route == "/tables"
        if made and answer is not None and answer.is_success:
            game = str(answer.json().get("id")) or None
        status = 0 if answer is None else answer.status_code
        self.tally.timed.append(Timed(sent, time.time() - sent, method, route, game, status))


def _code(answer: httpx.Response) -> str:
    try:
        return str(answer.json().get("code", ""))
    except ValueError:
        return ""


def _once() -> dict[str, str]:
    """An Idempotency-Key for one request (sent again with its retries)."""
    return {"Idempotency-Key": uuid.uuid4().hex}


async def open_table(http: Http, body: dict[str, Any]) -> str | None:
    answer = await http.call("POST", "/tables", body, _once())
    if answer is None or answer.status_code not in (200, 201, 202):
        http.tally.setup_refused.append(f"POST /tables {_status(answer)}")
        return None
    table = str(answer.json()["id"])
    http.tally.games.append(table)
    if answer.status_code != 201 or len(body.get("bots", {})) == body["seats"]:
        http.tally.started.add(table)  # a table of bots starts at once
    return table


def _status(answer: httpx.Response | None) -> str:
    return "unanswered" if answer is None else f"{answer.status_code} {answer.text[:200]}"


async def human(
    http: Http, rng: random.Random, think: tuple[float, float], stop: asyncio.Event
) -> None:
    """Play tables, one after another, until ``stop``; the last one to its end."""
    while not stop.is_set():
        await _one_table(http, rng, think)


async def _one_table(http: Http, rng: random.Random, think: tuple[float, float]) -> None:
    body = {"game": GAME, "seats": 2, "bots": {"1": "random"}, "deadline_s": 3600}
    table = await open_table(http, body)
    if table is None:
        await asyncio.sleep(1)
        return
    joined = await http.call("POST", f"/tables/{table}/join", {"name": "h0"}, _once())
    if joined is None or joined.status_code != 201:
        http.tally.setup_refused.append(f"join {table}: {_status(joined)}")
        return
    auth = {"Authorization": f"Bearer {joined.json()['token']}"}
    started = await http.call("POST", f"/tables/{table}/start", None, {**auth, **_once()})
    if started is None or started.status_code not in (200, 202):
        http.tally.setup_refused.append(f"start {table}: {_status(started)}")
        return
    http.tally.started.add(table)
    await _play(http, rng, think, table, auth)


async def _play(
    http: Http, rng: random.Random, think: tuple[float, float], game: str, auth: dict[str, str]
) -> None:
    last = 0
    sent = http.tally.sent.setdefault(game, set())
    while True:
        legal = await http.call("GET", f"/games/{game}/legal?after_version={last}", None, auth)
        if legal is None:
            return
        if legal.status_code == 404:  # started with a 202: the game is not readable yet
            await asyncio.sleep(0.5)
            continue
        if legal.status_code != 200:
            http.tally.setup_refused.append(f"legal {game}: {_status(legal)}")
            return
        seen = legal.json()
        if seen["finished"]:
            return
        if not seen["legal_commands"]:  # the bot's turn
            await asyncio.sleep(0.1)
            continue
        await asyncio.sleep(rng.uniform(*think))
        command_id = uuid.uuid4().hex
        sent.add(command_id)
        command = {**rng.choice(seen["legal_commands"]), "command_id": command_id}
        answer = await http.call("POST", f"/games/{game}/commands", command, auth)
        if answer is None:
            http.tally.unanswered.append((game, command_id))
        elif answer.status_code == 200:
            out = answer.json()
            http.tally.acked.append(Acked(game, command_id, out["version"], out["status"]))
            last = max(last, out["version"])
        else:
            version = seen["version"]
            detail = f"{answer.text[:300]} sent {command}"
            refusal = Refused(game, command_id, version, answer.status_code, _code(answer), detail)
            http.tally.refused.append(refusal)


async def bot_tables(http: Http, stop: asyncio.Event) -> None:
    """Open a table of two random bots and watch it until its game is over; again until
    ``stop`` (the last one watched to its end)."""
    body = {"game": GAME, "seats": 2, "bots": {"0": "random", "1": "random"}}
    while not stop.is_set():
        table = await open_table(http, body)
        if table is None:
            await asyncio.sleep(1)
            continue
        http.tally.bot_games.add(table)
        while True:
            await asyncio.sleep(2)
            seen = await http.call("GET", f"/tables/{table}")
            if seen is None or (seen.status_code == 200 and seen.json()["status"] == "finished"):
                break
