"""The one JSON codec of the contracts: every service and the shared kernel encode and
decode what they exchange or store (envelopes, Redis values, SQL columns, tokens, the CLI's
output) through these functions, so the wire form is chosen in one place.

- :func:`dump_json` / :func:`load_json`: compact JSON by pydantic-core (about five times
  ``json``'s speed; the engine writes every event and snapshot this way).
- :func:`key_json`: JSON with sorted keys, in ``json.dumps``'s default spacing, for text
  that is compared rather than read (option sets stored as keys and filtered on, digests):
  rows written before compare equal to rows written now, so this form must not change.
- :func:`readable_json`: indented, for people.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from pydantic_core import from_json, to_json


def dump_json(value: Any, fallback: Callable[[Any], Any] | None = None) -> str:
    """``value`` as compact JSON (as ``json.dumps`` with ``separators=(",", ":")`` writes
    it, non-ASCII as UTF-8); ``fallback`` turns what JSON has no form for (``str``: times,
    paths) into something it has."""
    return to_json(value, fallback=fallback).decode()


def json_bytes(value: Any) -> bytes:
    """:func:`dump_json` as bytes, for a document stored as it is (a view in Redis)."""
    return to_json(value)


def load_json(data: str | bytes) -> Any:
    """The value JSON ``data`` holds; :class:`ValueError` when it is not JSON."""
    return from_json(data)


def key_json(value: Any) -> str:
    """``value`` as JSON with sorted keys, spaced as ``json.dumps`` spaces it: the stable
    text of a value used as a key or compared as text (see the module's note)."""
    return json.dumps(value, sort_keys=True)


def readable_json(value: Any) -> str:
    """``value`` as indented JSON, for people."""
    return json.dumps(value, indent=2)
