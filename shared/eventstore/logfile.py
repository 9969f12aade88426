"""A game's log as JSON lines: the one form a log takes outside Redis.

One line per event, the whole envelope with its server-only ``secret`` (as the event store
reads it), in version order. The SQL archive keeps it compressed with zlib; ``caravel games
export`` writes it to a file (gzip when the name ends in ``.gz``) and ``import`` reads it back.
An exported file starts with one more line, its :class:`ExportHeader`: the Caravel version
that wrote it, the number of events and the final hash of a finished game, which the import
checks the log against (a file without it, from an older Caravel, still reads).
"""

from __future__ import annotations

import gzip
import importlib.metadata
import zlib
from collections.abc import Sequence
from pathlib import Path

from pydantic import BaseModel, ValidationError

from shared.contracts import EventEnvelope, read_event
from shared.games import api

HEADER_KEY = "caravel_export"


class ExportHeader(BaseModel):
    """What an exported log says of itself, on its first line."""

    caravel_export: int = 1  # the file format
    caravel_version: str
    game_id: str
    events: int
    final_hash: str | None = None  # the engine's hash of the final state, if it is over


def caravel_version() -> str:
    try:
        return importlib.metadata.version("caravel")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def dump_lines(events: Sequence[EventEnvelope]) -> bytes:
    """The events as JSON lines."""
    return b"".join(event.model_dump_json().encode() + b"\n" for event in events)


def load_lines(data: bytes) -> list[EventEnvelope]:
    """Events from JSON lines (upcast to the current schema like any stored event); an
    export's header line is skipped (:func:`load_export` reads it)."""
    return load_export(data)[1]


def load_export(data: bytes) -> tuple[ExportHeader | None, list[EventEnvelope]]:
    """An export's header (None if it has none) and events; ValueError naming the line
    that is not an event, in one line."""
    header, events = None, []
    for number, line in enumerate(data.splitlines(), 1):
        if not line.strip():
            continue
        try:
            if number == 1 and line.lstrip().startswith(b'{"' + HEADER_KEY.encode()):
                header = ExportHeader.model_validate_json(line)
                continue
            events.append(read_event(line))
        except (ValidationError, ValueError) as e:
            raise ValueError(
                f"line {number} is not an event of a game's log: {_first(e)}"
            ) from None
    return header, events


def _first(error: Exception) -> str:
    """The first thing wrong, in one line."""
    if isinstance(error, ValidationError):
        first = error.errors()[0]
        where = ".".join(map(str, first["loc"]))
        return f"{where}: {first['msg']}" if where else str(first["msg"])
    return str(error).splitlines()[0]


def dump_export(events: Sequence[EventEnvelope], final_hash: str | None) -> bytes:
    """An export: its header line, then the events as JSON lines."""
    header = ExportHeader(
        caravel_version=caravel_version(),
        game_id=events[0].game_id if events else "",
        events=len(events),
        final_hash=final_hash,
    )
    return header.model_dump_json().encode() + b"\n" + dump_lines(events)


def compress(events: Sequence[EventEnvelope]) -> bytes:
    return zlib.compress(dump_lines(events), level=6)


def decompress(blob: bytes) -> list[EventEnvelope]:
    return load_lines(zlib.decompress(blob))


def write_file(path: Path, events: Sequence[EventEnvelope], final_hash: str | None = None) -> None:
    """Write an export to ``path``: gzip if its name ends in ``.gz``, plain JSON lines if
    not."""
    data = dump_export(events, final_hash)
    path.write_bytes(gzip.compress(data) if path.suffix == ".gz" else data)


def read_file(path: Path) -> list[EventEnvelope]:
    """The events of a file written by :func:`write_file`."""
    return read_export(path)[1]


def read_export(path: Path) -> tuple[ExportHeader | None, list[EventEnvelope]]:
    """Read a file written by :func:`write_file` (gzip is recognised by its magic bytes);
    ValueError saying why in one line if it cannot be read (missing, truncated, not a log)."""
    try:
        data = path.read_bytes()
        if data[:2] == b"\x1f\x8b":
            data = gzip.decompress(data)
    except EOFError:
        raise ValueError(f"{path}: the gzip file is cut short (truncated)") from None
    except (OSError, zlib.error) as e:
        raise ValueError(
            f"{path}: {e.strerror or e}" if isinstance(e, OSError) else str(e)
        ) from None
    try:
        return load_export(data)
    except ValueError as e:
        raise ValueError(f"{path}: {e}") from None


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
