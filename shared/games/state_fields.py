"""A game state's fields, handled the same way by every game: copied (scalars shared, flat
lists copied), snapshotted with the rules the state was made under (ruleset name, options, a
carried file's text), restored as plain JSON data, and hashed canonically.

The hash is the state's canonical form (sorted keys, compact separators) and stays in the
game kernel: it is no contract between services but the identity of a state, and a golden
playthrough's final hash must not change when the services' codec does.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from typing import Any

from .ruleset_files import CARRIED


def copy_fields(src: Any, dst: Any, scalar: Iterable[str], flat: Iterable[str]) -> None:
    """Give ``dst`` ``src``'s rules and ``scalar`` fields, and copies of its ``flat`` lists
    (a game copies its nested lists its own way: their shapes differ)."""
    dst.rules = src.rules
    for name in scalar:
        setattr(dst, name, getattr(src, name))
    for name in flat:
        setattr(dst, name, getattr(src, name)[:])


def snapshot_of(state: Any, fields: Iterable[str], options: Mapping[str, Any]) -> dict[str, Any]:
    """``state``'s ``fields`` (hidden ones too: server only) and its rules' name, options and
    carried file."""
    out: dict[str, Any] = {name: getattr(state, name) for name in fields}
    rules = state.rules
    out["ruleset"] = rules.ruleset.name
    out["options"] = options
    if rules.file is not None:
        out[CARRIED] = rules.file
    return out


def restore_fields(state: Any, fields: Iterable[str], snapshot: Mapping[str, Any]) -> None:
    """Set ``state``'s ``fields`` present in ``snapshot`` to fresh copies as JSON has them
    (lists, not tuples; string keys), whether the snapshot made a JSON round trip or not."""
    for name in fields:
        if name in snapshot:
            setattr(state, name, json.loads(json.dumps(snapshot[name])))


def canonical_hash(snapshot: Mapping[str, Any]) -> str:
    """A digest of a whole snapshot: equal states, equal hashes (replay checks)."""
    text = json.dumps(snapshot, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()
