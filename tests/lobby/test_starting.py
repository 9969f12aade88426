"""The start-up probes (``/livez``, ``/readyz`` while a process waits for Redis or its
database) give their port up to the real app even while clients poll them over kept-alive
connections: ``caravel up`` once stayed "waiting for start" for good, its port held by a
connection a polling client made while the probes were closing (the benchmark of issue 24
hung on it)."""

from __future__ import annotations

import asyncio
import contextlib
import socket

import httpx

from services.server import _Starting
from shared.settings import Settings

from .helpers import free_port

POLLERS = 8
CLOSE_WAIT_S = 30.0  # a hang, not a speed: the close takes a few tenths of a second


async def test_the_probes_close_while_clients_poll_them_over_kept_connections() -> None:
    port = free_port()
    starting = _Starting(Settings(http_host="127.0.0.1", http_port=port), lobby=True, share=False)
    await starting.open()
    stop = asyncio.Event()
    answered: list[int] = []

    async def poll() -> None:
        """``/readyz`` again and again over one client's kept connection, as a load
        generator waiting for the server does (reconnecting when it is closed)."""
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as client:
            while not stop.is_set():
                with contextlib.suppress(httpx.TransportError):
                    answered.append((await client.get("/readyz")).status_code)
                await asyncio.sleep(0)

    pollers = [asyncio.create_task(poll()) for _ in range(POLLERS)]
    try:
        while len(answered) < 10 * POLLERS:
            await asyncio.sleep(0.01)
        for _ in range(20):  # the close meets a new connection at some point of its own
            await asyncio.wait_for(starting.close(), CLOSE_WAIT_S)
            with socket.socket() as freed:  # the real app could take the port now
                freed.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                freed.bind(("127.0.0.1", port))
            await starting.open()
    finally:
        stop.set()
        await asyncio.gather(*pollers)
        await starting.close()
    assert set(answered) == {503}  # what the probes answer while waiting
