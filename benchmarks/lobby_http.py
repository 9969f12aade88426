"""Benchmark: bot-filled games driven over HTTP, moves watched on the other seats' WebSockets.

    python benchmarks/lobby_http.py --games 20 --seconds 20 [--redis-url URL] [--json]
        [--lobbies N --database-url postgresql+psycopg://...]

Starts `caravel up` (its own key namespace, SQLite file and port; an embedded Redis unless
--redis-url is given), or with ``--lobbies N`` the services as processes of their own: an
engine, a bot player, scoring, and N lobbies serving one port (``CARAVEL_HTTP_SHARE_PORT``),
their tables in a PostgreSQL schema of their own. Each game has two human seats played by
this driver through `POST /games/{id}/commands` (a random legal move from the seat's view)
and two greedy bots.
It reports command submissions per second (each takes a view, a legal-commands read and
the POST), all HTTP requests per second, and the latency from sending a POST to the move
appearing on the *other* human seat's WebSocket. A benchmark, not a test.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import random
import subprocess
import sys
import time
from typing import Any

import httpx
import websockets
from scratch import postgres_schema  # beside this script

from services.capacity import free_port, server_env
from services.children import terminate
from shared.bus import connect, delete_namespace


class Watcher:
    """One seat's WebSocket: when each version reached it."""

    def __init__(self) -> None:
        self.arrivals: dict[int, float] = {}
        self.latest = 0
        self.changed = asyncio.Event()

    async def follow(self, url: str) -> None:
        async with websockets.connect(url, max_size=None) as ws:
            async for message in ws:
                event = json.loads(message)
                self.arrivals[event["version"]] = time.perf_counter()
                self.latest = max(self.latest, event["version"])
                self.changed.set()


async def play(
    client: httpx.AsyncClient, ws_base: str, deadline: float, rng: random.Random
) -> tuple[int, list[float]]:
    body = {"seats": 4, "bots": {"2": "greedy", "3": "greedy"}, "deadline_s": 3600}
    table = (await client.post("/tables", json=body)).json()
    game = table["id"]
    seats = [
        (await client.post(f"/tables/{game}/join", json={"name": f"h{i}"})).json() for i in range(2)
    ]
    headers = [{"Authorization": f"Bearer {s['token']}"} for s in seats]
    watchers = [Watcher(), Watcher()]
    tasks = [
        asyncio.create_task(w.follow(f"{ws_base}/games/{game}/ws?token={s['token']}"))
        for w, s in zip(watchers, seats, strict=True)
    ]
    await client.post(f"/tables/{game}/start", headers=headers[0])
    sent: list[tuple[int, int, int, float]] = []  # (other seat, first version, last, at)
    try:
        while time.perf_counter() < deadline:
            view = (await client.get(f"/games/{game}/view", headers=headers[0])).json()
            if view.get("phase") == "over":
                break
            decisions = view.get("pending") or []
            mine = [d["seat"] for d in decisions if d["seat"] in (0, 1)]
            if not mine:  # a bot's turn: wait for the game to move
                watchers[0].changed.clear()
                if watchers[0].latest <= view.get("version", 0):
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(watchers[0].changed.wait(), 5)
                continue
            seat = mine[0]
            legal = (await client.get(f"/games/{game}/legal", headers=headers[seat])).json()
            if legal.get("version") != view["version"] or not legal.get("legal_commands"):
                continue
            started = time.perf_counter()
            answer = await client.post(
                f"/games/{game}/commands",
                json=rng.choice(legal["legal_commands"]),
                headers=headers[seat],
            )
            if answer.status_code == 200:
                sent.append((1 - seat, view["version"] + 1, answer.json()["version"], started))
        await asyncio.sleep(0.5)  # let the last moves reach the sockets
    finally:
        for task in tasks:
            task.cancel()
    latencies = []
    for other, first, last, at in sent:
        arrivals = [
            watchers[other].arrivals[v]
            for v in range(first, last + 1)
            if v in watchers[other].arrivals
        ]
        if arrivals:
            latencies.append(min(arrivals) - at)
    return len(sent), latencies


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))] if ordered else 0.0


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    port = free_port()
    env = server_env(port, "cvhttp")
    if args.redis_url:
        env["CARAVEL_REDIS_URL"] = args.redis_url
    with contextlib.ExitStack() as held:
        if args.database_url:
            env["CARAVEL_DATABASE_URL"] = held.enter_context(postgres_schema(args.database_url))
        servers = [subprocess.Popen(command, env=e) for command, e in _processes(args, env)]
        try:
            return await _drive(args, port, env, servers)
        finally:
            if args.redis_url:  # leave a shared Redis as it was found
                redis = connect(args.redis_url)
                await delete_namespace(redis, env["CARAVEL_KEY_PREFIX"])
                await redis.aclose()


def _processes(
    args: argparse.Namespace, env: dict[str, str]
) -> list[tuple[list[str], dict[str, str]]]:
    """``caravel up`` alone, or (``--lobbies N``) an engine, a bot player, scoring and N lobby
    processes sharing the HTTP port."""
    cli = [sys.executable, "-m", "services.cli"]
    if not args.lobbies:
        return [([*cli, "up"], env)]
    alone = {**env, "CARAVEL_METRICS_PORT": "0"}
    shared = {**env, "CARAVEL_HTTP_SHARE_PORT": "true"}
    return [([*cli, name], alone) for name in ("engine", "ai", "scoring")] + [
        ([*cli, "lobby"], shared)
    ] * args.lobbies


async def _drive(
    args: argparse.Namespace, port: int, env: dict[str, str], servers: list[subprocess.Popen[bytes]]
) -> dict[str, Any]:
    base = f"http://127.0.0.1:{port}"
    try:
        limits = httpx.Limits(max_connections=4 * args.games + 10)
        requests = 0

        async def count(_: httpx.Request) -> None:
            nonlocal requests
            requests += 1

        async with httpx.AsyncClient(
            base_url=base, timeout=60, limits=limits, event_hooks={"request": [count]}
        ) as client:
            for _ in range(600):
                try:
                    if (await client.get("/readyz")).status_code == 200:
                        break
                except httpx.TransportError:
                    await asyncio.sleep(0.05)
            started = time.perf_counter()
            deadline = started + args.seconds
            results = await asyncio.gather(
                *(
                    play(client, f"ws://127.0.0.1:{port}", deadline, random.Random(i))
                    for i in range(args.games)
                )
            )
            elapsed = time.perf_counter() - started
    finally:
        terminate(servers, 30)
    commands = sum(n for n, _ in results)
    latencies = [x for _, lat in results for x in lat]
    return {
        "games": args.games,
        "seconds": round(elapsed, 2),
        "commands": commands,
        "commands_per_second": round(commands / elapsed, 1),
        "http_requests_per_second": round(requests / elapsed, 1),
        "latency_ms": {
            name: round(1000 * percentile(latencies, q), 2)
            for name, q in (("p50", 0.5), ("p95", 0.95), ("p99", 0.99))
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--games", type=int, default=20)
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--redis-url", default=None)
    parser.add_argument(
        "--lobbies",
        type=int,
        default=0,
        help="0: one `caravel up`; N: an engine, a bot player, scoring and N lobby processes "
        "sharing the HTTP port (needs --redis-url, and --database-url for more than one)",
    )
    parser.add_argument("--database-url", default=None, help="PostgreSQL (a schema of its own)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    result = asyncio.run(main_async(args))
    print(json.dumps(result) if args.json else result)


if __name__ == "__main__":
    main()
