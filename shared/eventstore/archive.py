"""The archive of finished games: their logs in SQL, so that Redis holds live games only.

A finished game's whole log (every event with its server-only part, as JSON lines, zlib
compressed), its final hash and its seats go to one row of ``archived_games``. Archiving is
three steps, each safe to repeat, so a crash anywhere loses nothing and a rerun finishes
the job:

1. write the row, unless one is there already (a rerun finds it);
2. read the row back and verify it: it decompresses, holds versions 1..N of the game, and
   replaying it gives the final hash the engine recorded;
3. only then delete the game's keys from Redis (``EventStore.forget``: if the game is still
   the one read in step 1), leaving its id in the partition's ``archived`` set.

The event store reads archived games from here (``EventStore(archive=...)``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy import Column, DateTime, Engine, LargeBinary, Table, select
from sqlalchemy.exc import IntegrityError
from sqlmodel import Field, SQLModel

from shared.contracts import EventEnvelope, key_json, load_json
from shared.sql import create_tables

from . import logfile
from .codec import GameCodec
from .reading import FinishedLog
from .store import EventStore


def _now() -> datetime:
    return datetime.now(UTC)


class ArchivedGame(SQLModel, table=True):
    """One finished game, whole: enough to serve, score and replay it without Redis."""

    __tablename__ = "archived_games"

    game_id: str = Field(primary_key=True, max_length=64)
    game: str = Field(max_length=64, index=True)  # the registry's name of what was played
    version: int  # the log holds versions 1..version
    final_hash: str = Field(max_length=128)  # the engine's hash of the final state
    seats: str  # JSON: the lobby's seats hash (who played each seat), for scoring
    log: bytes = Field(sa_column=Column(LargeBinary, nullable=False))  # zlib of JSON lines
    archived_at: datetime = Field(
        default_factory=_now, sa_column=Column(DateTime(timezone=True), nullable=False)
    )


TABLE: Table = ArchivedGame.__table__  # type: ignore[attr-defined]


class ArchiveMismatch(Exception):
    """An archived row does not hold the game it should: nothing is deleted from Redis."""


@dataclass(frozen=True)
class Archived:
    """What archiving a game did: ``deleted`` is False when Redis kept it (it changed)."""

    game_id: str
    version: int
    compressed_bytes: int
    deleted: bool


class Archive:
    """The ``archived_games`` table (its methods block: async callers use a thread). The
    table is created on first use, under the schema lock (``shared.sql``)."""

    def __init__(self, db: Engine) -> None:
        self.db = db
        self._ready = False

    def _table(self) -> Table:
        if not self._ready:
            create_tables(self.db, [TABLE])
            self._ready = True
        return TABLE

    def keep(self, finished: FinishedLog) -> ArchivedGame:
        """Steps 1 and 2: write the game's row (unless there) and verify what is stored;
        returns the stored row, or raises :class:`ArchiveMismatch`."""
        row = ArchivedGame(
            game_id=finished.game_id,
            game=finished.events[0].data.get("game", ""),
            version=finished.version,
            final_hash=finished.final_hash,
            seats=key_json(finished.seats),
            log=logfile.compress(finished.events),
        )
        table = self._table()
        try:
            with self.db.begin() as conn:
                conn.execute(table.insert().values(**row.model_dump()))
        except IntegrityError:
            pass  # archived before (a rerun): what is stored is verified like a new row
        stored = self.get(finished.game_id)
        if stored is None:
            raise ArchiveMismatch(f"{finished.game_id}: the archived row cannot be read back")
        verify(stored, finished.version, finished.final_hash)
        return stored

    def get(self, game_id: str) -> ArchivedGame | None:
        table = self._table()
        with self.db.connect() as conn:
            row = conn.execute(select(table).where(table.c.game_id == game_id)).first()
        return None if row is None else ArchivedGame.model_validate(row._mapping)

    def has(self, game_id: str) -> bool:
        return bool(self.kept([game_id]))

    def kept(self, game_ids: Sequence[str]) -> set[str]:
        """Those of ``game_ids`` that are archived (one query)."""
        table = self._table()
        with self.db.connect() as conn:
            query = select(table.c.game_id).where(table.c.game_id.in_(game_ids))
            return set(conn.execute(query).scalars())

    def logs(self, game_ids: Sequence[str]) -> dict[str, list[EventEnvelope]]:
        """The whole logs of those of ``game_ids`` that are archived."""
        table = self._table()
        with self.db.connect() as conn:
            query = select(table.c.game_id, table.c.log).where(table.c.game_id.in_(game_ids))
            return {game_id: logfile.decompress(log) for game_id, log in conn.execute(query)}

    def seats(self, game_ids: Sequence[str]) -> dict[str, dict[str, str]]:
        """The seats hashes of those of ``game_ids`` that are archived."""
        table = self._table()
        with self.db.connect() as conn:
            query = select(table.c.game_id, table.c.seats).where(table.c.game_id.in_(game_ids))
            return {game_id: load_json(seats) for game_id, seats in conn.execute(query)}


def verify(row: ArchivedGame, version: int, final_hash: str) -> list[EventEnvelope]:
    """The row's events, if they are versions 1..``version`` of its game and replay to
    ``final_hash``; else :class:`ArchiveMismatch` saying what differs."""
    if (row.version, row.final_hash) != (version, final_hash):
        raise ArchiveMismatch(
            f"{row.game_id}: archived at version {row.version} with hash {row.final_hash}, "
            f"but Redis has version {version} with hash {final_hash}"
        )
    try:
        events = logfile.decompress(row.log)
        game_id = logfile.check_log(events)
        codec = GameCodec()
        replayed = codec.state_hash(codec.replay(events))
    except Exception as e:
        raise ArchiveMismatch(f"{row.game_id}: the archived log does not replay: {e}") from e
    if game_id != row.game_id or len(events) != version:
        raise ArchiveMismatch(f"{row.game_id}: the archived log holds {len(events)} events")
    if replayed != final_hash:
        raise ArchiveMismatch(f"{row.game_id}: the archived log replays to another hash")
    return events


async def archive_game(store: EventStore, archive: Archive, game_id: str) -> Archived | None:
    """Archive one finished game (the three steps above); None if Redis holds no finished
    game of that id (archived already, say). Raises :class:`ArchiveMismatch` and leaves
    Redis as it was if the archive does not verify."""
    finished = await store.finished_log(game_id)
    if finished is None:
        return None
    stored = await asyncio.to_thread(archive.keep, finished)
    deleted = await store.forget(game_id, finished.version, finished.final_hash)
    return Archived(game_id, finished.version, len(stored.log), deleted)
