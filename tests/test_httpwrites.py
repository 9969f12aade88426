"""The HTTP server's writes: an answer's head and body leave in one socket write (issue 24,
``services/httpwrites.py``), on the lobby's own uvicorn settings, and a WebSocket upgraded
from such a connection works as before, the frames of one turn in one write."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import uvicorn
import websockets
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route, WebSocketRoute
from starlette.websockets import WebSocket
from uvicorn.config import HTTP_PROTOCOLS
from uvicorn.importer import import_from_string

from services.server import _http_config
from shared.settings import Settings


class Recording:
    """A transport that notes each write it passes on (everything else is the socket's)."""

    def __init__(self, transport: asyncio.Transport, writes: list[bytes]) -> None:
        self._transport, self.writes = transport, writes

    def write(self, data: bytes) -> None:
        self.writes.append(bytes(data))
        self._transport.write(data)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


async def answer(request: Request) -> JSONResponse:
    return JSONResponse({"version": 3, "legal": [{"type": "pass"}] * 20})


async def stream(request: Request) -> StreamingResponse:
    async def parts() -> AsyncIterator[bytes]:
        for part in (b"one,", b"two"):
            yield part

    return StreamingResponse(parts(), media_type="text/plain")


async def empty(request: Request) -> Response:
    return Response(status_code=204)


async def echo(websocket: WebSocket) -> None:
    await websocket.accept()
    await websocket.send_text(f"echo {await websocket.receive_text()}")
    await websocket.close()


async def burst(websocket: WebSocket) -> None:
    """Three frames sent one after the other in one step (a move's events and decision)."""
    await websocket.accept()
    await websocket.receive_text()
    for n in range(3):
        await websocket.send_text(f"frame {n}")
    await websocket.receive_text()
    await websocket.close()


@asynccontextmanager
async def serving(writes: list[bytes]) -> AsyncIterator[int]:
    """The lobby's uvicorn settings serving a small app on a free port, each connection's
    socket writes noted in ``writes``."""
    app = Starlette(
        routes=[
            Route("/answer", answer, methods=["GET", "HEAD"]),
            Route("/stream", stream),
            Route("/empty", empty),
            WebSocketRoute("/ws", echo),
            WebSocketRoute("/burst", burst),
        ]
    )
    config = _http_config(app, Settings())  # type: ignore[arg-type]
    protocol: Any = config.http  # uvicorn's own when named ("auto": httptools')
    if isinstance(protocol, str):
        protocol = import_from_string(HTTP_PROTOCOLS[protocol])

    class Noted(protocol):  # type: ignore[misc]
        def connection_made(self, transport: asyncio.Transport) -> None:
            super().connection_made(Recording(transport, writes))

    config.http = Noted
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve(sockets=[sock]))
    while not server.started:
        await asyncio.sleep(0.01)
    try:
        yield sock.getsockname()[1]
    finally:
        server.should_exit = True
        await task


async def exchange(port: int, request: bytes) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(request)
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.lower().split(b"\r\n")
    length = next(int(line.split(b":")[1]) for line in lines if line.startswith(b"content-length"))
    body = await reader.readexactly(length)
    writer.close()
    await writer.wait_closed()
    return head + body


async def test_an_answer_s_head_and_body_leave_in_one_write() -> None:
    writes: list[bytes] = []
    async with serving(writes) as port:
        request = b"GET /answer HTTP/1.1\r\nhost: x\r\n\r\n"
        got = await exchange(port, request)
        await asyncio.sleep(0.05)
    assert got.startswith(b"HTTP/1.1 200 OK\r\n")
    assert got.endswith(b'"legal":' + b"[" + b",".join([b'{"type":"pass"}'] * 20) + b"]}")
    assert writes == [got]  # one write: without the cork, the head and the body apart


async def test_two_answers_on_one_connection_each_in_one_write() -> None:
    writes: list[bytes] = []
    async with serving(writes) as port:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        for _ in range(2):
            writer.write(b"GET /answer HTTP/1.1\r\nhost: x\r\n\r\n")
            head = await reader.readuntil(b"\r\n\r\n")
            await reader.readuntil(b"]}")
            assert head.startswith(b"HTTP/1.1 200 OK")
        writer.close()
        await writer.wait_closed()
    assert len(writes) == 2
    assert all(w.startswith(b"HTTP/1.1 200 OK") and w.endswith(b"]}") for w in writes)


async def test_a_websocket_upgraded_from_a_corked_connection_works() -> None:
    writes: list[bytes] = []
    async with serving(writes) as port, websockets.connect(f"ws://127.0.0.1:{port}/ws") as ws:
        await ws.send("hello")
        assert await ws.recv() == "echo hello"
    assert writes[0].startswith(b"HTTP/1.1 101")


async def test_a_websockets_frames_of_one_turn_leave_in_one_write_each_a_frame() -> None:
    """The frames a socket is sent in one turn go out in one socket write (uvicorn wrote
    each on its own: a move's events and decision request took a write each), and the
    client still reads each as a message of its own, in order."""
    writes: list[bytes] = []
    async with serving(writes) as port, websockets.connect(f"ws://127.0.0.1:{port}/burst") as ws:
        await ws.send("go")
        assert [await ws.recv() for _ in range(3)] == ["frame 0", "frame 1", "frame 2"]
        framed = [w for w in writes if b"frame " in w]
        await ws.send("bye")
    assert len(framed) == 1 and framed[0].count(b"frame ") == 3


async def test_answers_without_a_body_and_streamed_ones_are_whole() -> None:
    """A HEAD's head, a 204 and a chunked answer: nothing held back, nothing lost."""
    writes: list[bytes] = []
    async with serving(writes) as port:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"HEAD /answer HTTP/1.1\r\nhost: x\r\n\r\n")
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
        assert head.startswith(b"HTTP/1.1 200 OK") and b"content-length" in head.lower()
        writer.write(b"GET /empty HTTP/1.1\r\nhost: x\r\n\r\n")
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
        assert head.startswith(b"HTTP/1.1 204")
        writer.write(b"GET /stream HTTP/1.1\r\nhost: x\r\n\r\n")
        got = await asyncio.wait_for(reader.readuntil(b"0\r\n\r\n"), 5)
        assert b"transfer-encoding: chunked" in got and got.endswith(b"3\r\ntwo\r\n0\r\n\r\n")
        writer.close()
        await writer.wait_closed()
    streamed = [w for w in writes if b"one," in w]
    assert streamed and streamed[0].startswith(b"HTTP/1.1 200 OK")  # its head with its first part
