"""Contracts: the envelopes every service exchanges, as versioned pydantic models.

Commands travel from players and bots to the engine; events travel from the engine's log to
every other service; rejections and decision requests travel back to whoever must know.
Old events keep loading through upcasters registered per (type, schema version).
"""

from __future__ import annotations

from .codec import dump_json, json_bytes, key_json, load_json, readable_json
from .envelopes import (
    SCHEMA_VERSION,
    CommandEnvelope,
    CommandResult,
    DeadLetter,
    DecisionHead,
    DecisionRequest,
    EncodedEvent,
    EventEnvelope,
    Kept,
    Made,
    Rejection,
    command_key,
    decision_head,
    encode_event,
    id_json,
    load_event,
    name_json,
    new_event_id,
    new_id,
    new_tuple,
    read_command,
    read_decision_request,
    read_event,
    stored_event_id,
    string_json,
)
from .notices import SeatChange, ViewWant
from .records import IMPORTED, Notification, Seats

__all__ = [
    "IMPORTED",
    "SCHEMA_VERSION",
    "CommandEnvelope",
    "CommandResult",
    "DeadLetter",
    "DecisionHead",
    "DecisionRequest",
    "EncodedEvent",
    "EventEnvelope",
    "Kept",
    "Made",
    "Notification",
    "Rejection",
    "SeatChange",
    "Seats",
    "ViewWant",
    "command_key",
    "decision_head",
    "dump_json",
    "encode_event",
    "id_json",
    "json_bytes",
    "key_json",
    "load_event",
    "load_json",
    "name_json",
    "new_event_id",
    "new_id",
    "new_tuple",
    "read_command",
    "read_decision_request",
    "read_event",
    "readable_json",
    "stored_event_id",
    "string_json",
]
