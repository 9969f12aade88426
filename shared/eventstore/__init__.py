"""The game event log on Redis Streams: atomic appends, reads, snapshots, loading."""

from .codec import GameCodec, to_event
from .store import Append, AppendResult, Codec, EventStore, Loaded

__all__ = ["Append", "AppendResult", "Codec", "EventStore", "GameCodec", "Loaded", "to_event"]
