"""A game's log as JSON lines: the one form a log takes outside Redis.

One line per event, the whole envelope with its server-only ``secret`` (as the event store
reads it), in version order. The SQL archive keeps it compressed with zlib; ``caravel games
export`` writes it to a file (gzip when the name ends in ``.gz``) and ``import`` reads it back.
"""

from __future__ import annotations

import gzip
import zlib
from collections.abc import Sequence
from pathlib import Path

from shared.contracts import EventEnvelope, read_event
from shared.games import api


def dump_lines(events: Sequence[EventEnvelope]) -> bytes:
    """The events as JSON lines."""
    return b"".join(event.model_dump_json().encode() + b"\n" for event in events)


def load_lines(data: bytes) -> list[EventEnvelope]:
    """Events from JSON lines (upcast to the current schema like any stored event)."""
    return [read_event(line) for line in data.splitlines() if line.strip()]


def compress(events: Sequence[EventEnvelope]) -> bytes:
    return zlib.compress(dump_lines(events), level=6)


def decompress(blob: bytes) -> list[EventEnvelope]:
    return load_lines(zlib.decompress(blob))


def write_file(path: Path, events: Sequence[EventEnvelope]) -> None:
    """Write a log to ``path``: gzip if its name ends in ``.gz``, plain JSON lines if not."""
    data = dump_lines(events)
    path.write_bytes(gzip.compress(data) if path.suffix == ".gz" else data)


def read_file(path: Path) -> list[EventEnvelope]:
    """Read a log written by :func:`write_file` (gzip is recognised by its magic bytes)."""
    data = path.read_bytes()
    return load_lines(gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data)


def check_log(events: Sequence[EventEnvelope]) -> str:
    """The game id of a whole log, or ValueError saying why it is not one: one game, versions
    1, 2, 3, ... without gaps, starting with ``game_created``."""
    if not events:
        raise ValueError("the log is empty")
    game_id = events[0].game_id
    if events[0].type != api.GAME_CREATED:
        raise ValueError(f"{game_id}: a log starts with {api.GAME_CREATED}, not {events[0].type}")
    for expected, event in enumerate(events, 1):
        if event.game_id != game_id:
            raise ValueError(f"version {event.version} is of game {event.game_id}, not {game_id}")
        if event.version != expected:
            raise ValueError(f"{game_id}: expected version {expected}, found {event.version}")
    return game_id
