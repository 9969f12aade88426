"""uvicorn's HTTP protocol with an answer's head and body in one socket write.

uvicorn's httptools protocol writes an answer's status line and headers, then its body, in
two ``transport.write`` calls: two ``send`` system calls and two TCP segments per answer,
the client woken for the head and again for the body (issue 24: on the lobby's HTTP move
path, two answers a move). Here each request's cycle writes through :class:`HeadHeld`: the
head of an answer that has a body is held until the body's first write and goes out with
it, in one write. Nothing waits for a later turn of the loop: the body follows the head in
the same step of the app. A WebSocket upgraded from the connection writes through the
socket's own transport, as before.
"""

from __future__ import annotations

import asyncio
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol, RequestResponseCycle


class HeadHeld:
    """A request cycle's transport: the answer's head, when a body is to follow, held until
    the body's first write (then both in one write); anything else written as it comes.
    Closing writes a held head first (an answer cut short is cut where it was)."""

    __slots__ = ("cycle", "head", "started", "transport")

    def __init__(self, transport: asyncio.Transport, cycle: RequestResponseCycle) -> None:
        self.transport, self.cycle = transport, cycle
        self.head: bytes | None = None
        self.started = False  # the head was written (held or not)

    def write(self, data: bytes) -> None:
        cycle = self.cycle
        if not self.started and cycle.response_started:  # this is the head
            self.started = True
            body_follows = cycle.chunked_encoding or cycle.expected_content_length > 0
            if body_follows and cycle.scope["method"] != "HEAD":
                self.head = bytes(data)
                return
        if self.head is not None:
            data, self.head = self.head + data, None
        self.transport.write(data)

    def flush(self) -> None:
        """Write a held head."""
        if self.head is not None:
            head, self.head = self.head, None
            self.transport.write(head)

    def close(self) -> None:
        self.flush()
        self.transport.close()

    def is_closing(self) -> bool:
        return self.transport.is_closing()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.transport, name)


class HeadHeldHttpToolsProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol whose request cycles write through :class:`HeadHeld`
    (see the module)."""

    def _start_asgi_task(self, cycle: RequestResponseCycle, app: Any) -> None:
        cycle.transport = HeadHeld(cycle.transport, cycle)  # type: ignore[assignment]
        super()._start_asgi_task(cycle, app)
