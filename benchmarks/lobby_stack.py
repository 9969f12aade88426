"""Benchmark: the lobby's HTTP stack per request for an HTTP move's two routes, their
endpoints stubbed (issue 24, branch ``lobby7``).

    PYTHONPATH=<tree> python benchmarks/lobby_stack.py [--requests 3000] [--profile]

The app of ``create_app`` (every middleware, exception handler and route), the lean readers
of ``POST /games/{id}/commands`` and ``GET /games/{id}/legal`` replaced by a stub that reads
the body and answers a fixed one; ``--requests`` of each through the ASGI app in process (no
sockets, no Redis call). Prints the CPU (``process_time``) per request, or with
``--profile`` the ``cProfile`` of the loop (its function calls a request are not moved by the
machine's load). Run it with another tree on ``PYTHONPATH`` for its figures.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import pstats
import time
from typing import Any

from redis.asyncio import Redis
from sqlalchemy import create_engine
from starlette.requests import Request
from starlette.responses import Response

from services.lobby import app as lobby_app
from services.lobby import games, lean
from shared.bus import Keys
from shared.settings import Settings

BODY = b'{"version":3,"legal":{"version":4,"seat":1,"legal_commands":[],"finished":false}}'
COMMAND = b'{"type":"x","a":1}  '


async def stub(request: Request) -> Response:
    """A lean reader's stand-in: the body read as a move's is, a fixed answer."""
    if request.method == "POST":
        await lean.json_object(request)
    return Response(BODY, media_type="application/json")


def scope(method: str, path: str, query: bytes) -> dict[str, Any]:
    headers = [
        (b"host", b"x"),
        (b"content-type", b"application/json"),
        (b"content-length", str(len(COMMAND)).encode()),
        (b"authorization", b"Bearer abc"),
    ]
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": query,
        "root_path": "",
        "headers": headers,
        "client": ("127.0.0.1", 1234),
        "server": ("127.0.0.1", 80),
    }


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=3000)
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    lean.LEAN[games.send_command] = lean.LEAN[games.get_legal] = stub
    redis = Redis.from_url("redis://127.0.0.1:1/0")  # never called
    app = lobby_app.create_app(redis, Keys("stack"), create_engine("sqlite://"), Settings())

    async def call(method: str, path: str, query: bytes) -> None:
        sent: list[dict[str, Any]] = []

        async def receive() -> dict[str, Any]:
            return {"type": "http.request", "body": COMMAND, "more_body": False}

        async def send(message: dict[str, Any]) -> None:
            sent.append(message)

        await app(scope(method, path, query), receive, send)
        assert sent[0]["status"] == 200, sent

    async def moves(n: int) -> None:
        for _ in range(n):
            await call("POST", "/games/t-abc/commands", b"legal=true")
            await call("GET", "/games/t-abc/legal", b"after_version=12")

    await moves(150)  # warm up
    profile = cProfile.Profile() if args.profile else None
    started = time.process_time()
    if profile:
        profile.enable()
    await moves(args.requests)
    if profile:
        profile.disable()
        pstats.Stats(profile).sort_stats("cumulative").print_stats(30)
    cpu = time.process_time() - started
    print(f"{1e6 * cpu / (2 * args.requests):.1f} µs of CPU a request (stack only)")


if __name__ == "__main__":
    asyncio.run(main())
