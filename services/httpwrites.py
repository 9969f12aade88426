"""uvicorn's HTTP protocol with an answer's head and body in one socket write.

uvicorn's httptools protocol writes an answer's status line and headers, then its body, in
two ``transport.write`` calls: two ``send`` system calls and two TCP segments per answer,
each waking the client. On the lobby's HTTP move path (two answers a move) those writes
were a sixth of its CPU per move, the head's write alone 11 % (py-spy, issue 24). Here the
protocol writes through :class:`Corked`: what is written in one turn of the event loop
goes out in one write at the end of that turn (``call_soon``), so a head and its body, sent
one after the other by the app, leave together. A socket upgraded to a WebSocket keeps
it: the frames a socket is sent in one turn (a move's events and its decision request, sent
one after the other by the socket's stream) leave in one write too, each still a frame of
its own (issue 24, `lobby12`: ~4 writes a move fewer in the lobby's WebSocket moves).

Why at the end of the turn rather than with the body's write: the server's CPU per
request of a small app under 20 keep-alive clients, closed loop (alternated, load 10-15,
benchmarks/README.md "branch lobby8"): this 0.85-0.92 of uvicorn's two writes; the head
held until the body's write and both written at once, in the same step, 0.98-1.11. The
write after the turn lets the loop finish the answer's bookkeeping before the client is
woken, and takes the next requests of several connections in one wake-up.
"""

from __future__ import annotations

import asyncio
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol


class Corked(asyncio.Transport):
    """A transport whose writes of one loop turn leave in one write of the transport
    under it, at the end of that turn; closing, ending or switching protocols writes what
    is held first. Everything else is the transport's own."""

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__()
        self.transport, self.loop = transport, loop
        self.held: list[bytes] = []

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if not data:
            return
        if not self.held:
            self.loop.call_soon(self.flush)
        self.held.append(bytes(data))

    def writelines(self, list_of_data: Any) -> None:
        for data in list_of_data:
            self.write(data)

    def flush(self) -> None:
        """Write what is held, in one piece (nothing to a transport already closing)."""
        if not self.held:
            return
        held, self.held = self.held, []
        if not self.transport.is_closing():
            self.transport.write(held[0] if len(held) == 1 else b"".join(held))

    def close(self) -> None:
        self.flush()
        self.transport.close()

    def abort(self) -> None:
        self.held = []
        self.transport.abort()

    def write_eof(self) -> None:
        self.flush()
        self.transport.write_eof()

    def can_write_eof(self) -> bool:
        return self.transport.can_write_eof()

    def is_closing(self) -> bool:
        return self.transport.is_closing()

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return self.transport.get_extra_info(name, default)

    def set_protocol(self, protocol: asyncio.BaseProtocol) -> None:
        self.flush()
        self.transport.set_protocol(protocol)

    def get_protocol(self) -> asyncio.BaseProtocol:
        return self.transport.get_protocol()

    def is_reading(self) -> bool:
        return self.transport.is_reading()

    def pause_reading(self) -> None:
        self.transport.pause_reading()

    def resume_reading(self) -> None:
        self.transport.resume_reading()

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        self.transport.set_write_buffer_limits(high, low)

    def get_write_buffer_size(self) -> int:
        return self.transport.get_write_buffer_size() + sum(map(len, self.held))

    def get_write_buffer_limits(self) -> tuple[int, int]:
        return self.transport.get_write_buffer_limits()


class CorkedHttpToolsProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol writing through :class:`Corked` (see the module)."""

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(Corked(transport, self.loop))
