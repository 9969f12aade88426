"""Redis replies as Python values: redis-py answers bytes (no ``decode_responses``: stream
entries carry binary JSON), so names, ids and counts read as text pass through here."""

from __future__ import annotations

from typing import Any


def text(value: Any) -> str:
    """A reply's bytes as text (a str as it is, anything else through ``str``)."""
    return value.decode() if isinstance(value, bytes) else str(value)
