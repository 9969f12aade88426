"""The game event log on Redis Streams: atomic appends, reads, snapshots, loading; and the
SQL archive of finished games, read through the same store."""

from .archive import Archive, ArchivedGame, ArchiveMismatch, archive_game
from .codec import GameCodec, to_event
from .reading import (
    Codec,
    EventReader,
    Finished,
    FinishedLog,
    Loaded,
    PendingDecisions,
    pending_of,
)
from .store import Append, AppendResult, EventStore, Held, Pending
from .transfer import GameExists, export_log, final_hash, import_log

__all__ = [
    "Append",
    "AppendResult",
    "Archive",
    "ArchiveMismatch",
    "ArchivedGame",
    "Codec",
    "EventReader",
    "EventStore",
    "Finished",
    "FinishedLog",
    "GameCodec",
    "GameExists",
    "Held",
    "Loaded",
    "Pending",
    "PendingDecisions",
    "archive_game",
    "export_log",
    "final_hash",
    "import_log",
    "pending_of",
    "to_event",
]
