"""A lean HTTP/1.1 client for the closed loop's moves: one keep-alive connection over
asyncio streams, one request at a time, JSON in and out.

httpx cost the driver about 2 ms of CPU per request (4 ms a move of two requests): on a
two-core machine, one driver process at ~250 moves/s took a whole core, and the benchmark
measured its client, not the server (issue 24). This one parses no more than the status
line and ``content-length`` (every answer of the lobby's JSON routes has one)."""

from __future__ import annotations

import asyncio
from typing import Any
from urllib.parse import urlsplit

from shared.contracts import dump_json, load_json


class HttpError(Exception):
    """An answer this client cannot read (no content-length), or a closed connection."""


class LeanClient:
    """One keep-alive HTTP/1.1 connection to ``base`` (``http://host:port``), opened on
    first use and again after the server closes it."""

    def __init__(self, base: str) -> None:
        parts = urlsplit(base)
        self.host, self.port = parts.hostname or "127.0.0.1", parts.port or 80
        self._host_header = f"{self.host}:{self.port}".encode()
        self._streams: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None

    async def request(
        self, method: str, path: str, body: Any = None, token: str | None = None
    ) -> tuple[int, Any]:
        """Send one request (``body`` as JSON if not None, ``token`` as a bearer token):
        the status and the answer's JSON (None for an empty body). A connection the
        server closed is opened again once."""
        payload = b"" if body is None else dump_json(body).encode()
        head = [f"{method} {path} HTTP/1.1".encode(), b"host: " + self._host_header]
        if token is not None:
            head.append(f"authorization: Bearer {token}".encode())
        if body is not None:
            head.append(b"content-type: application/json")
        head.append(b"content-length: %d" % len(payload))
        data = b"\r\n".join(head) + b"\r\n\r\n" + payload
        for attempt in (0, 1):
            reader, writer = await self._open()
            try:
                writer.write(data)
                return await _answer(reader)
            except (ConnectionError, asyncio.IncompleteReadError):
                await self.close()
                if attempt:
                    raise HttpError(f"{method} {path}: the connection closed") from None
        raise AssertionError("unreachable")

    async def _open(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        if self._streams is None:
            self._streams = await asyncio.open_connection(self.host, self.port)
        return self._streams

    async def close(self) -> None:
        if self._streams is not None:
            writer = self._streams[1]
            self._streams = None
            writer.close()


async def _answer(reader: asyncio.StreamReader) -> tuple[int, Any]:
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    status = int(lines[0].split(b" ", 2)[1])
    length = None
    for line in lines[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    if length is None:
        raise HttpError(f"an answer without content-length: {lines[0]!r}")
    raw = await reader.readexactly(length) if length else b""
    return status, load_json(raw) if raw else None
