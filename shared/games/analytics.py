"""What analytics asks of a game: its readable labels (every namespace present), a
ruleset's content hash and the names of its score breakdown (the protocol's ``labels``,
``rules`` and ``results``, read the same way for every game)."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Mapping
from functools import cache
from typing import Any

from pydantic import BaseModel

from .protocol import AnyGame
from .registry import get

LABEL_SPACES = ("sides", "columns", "facts", "subjects", "options", "values")
"""The namespaces of a game's labels: sides (nations, colours), breakdown columns, fact
kinds, fact subjects (buildings, regions, goods), option keys and option values."""


def readable(identifier: str) -> str:
    """An id as words: ``rio_de_la_plata`` → ``Rio de la plata`` (the fallback label)."""
    words = str(identifier).replace("_", " ").replace("-", " ").strip()
    return words[:1].upper() + words[1:] if words else str(identifier)


def labels(game: AnyGame) -> dict[str, dict[str, str]]:
    """The game's readable labels by namespace (its ``labels`` plug-in, every namespace
    present); ids it does not name are shown through :func:`readable`."""
    found = game.labels()
    return {space: dict(found.get(space, {})) for space in LABEL_SPACES}


def named_ids(data: Any) -> dict[str, str]:
    """Every ``id`` → ``name`` pair in a ruleset's data (regions, buildings, ...): the labels
    a ruleset file already holds."""
    out: dict[str, str] = {}
    if isinstance(data, BaseModel):
        data = data.model_dump(mode="json")
    if isinstance(data, Mapping):
        if isinstance(data.get("id"), str) and isinstance(data.get("name"), str):
            out[data["id"]] = data["name"]
        for value in data.values():
            out.update(named_ids(value))
    elif isinstance(data, list | tuple):
        for item in data:
            out.update(named_ids(item))
    return out


def _canonical(value: Any) -> Any:
    """JSON-ready data that depends on ``value``'s content alone (dict and set order,
    dataclass and model types aside); fields that do not take part in equality (a carried
    file's text) are left out."""
    if isinstance(value, BaseModel):
        return _canonical(value.model_dump(mode="json"))
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {
            f.name: _canonical(getattr(value, f.name))
            for f in dataclasses.fields(value)
            if f.compare
        }
    if isinstance(value, Mapping):
        return {str(k): _canonical(v) for k, v in sorted(value.items(), key=lambda kv: str(kv[0]))}
    if isinstance(value, set | frozenset):
        return sorted((_canonical(v) for v in value), key=lambda v: json.dumps(v, sort_keys=True))
    if isinstance(value, list | tuple):
        return [_canonical(v) for v in value]
    if value is None or isinstance(value, bool | int | float | str):
        return value
    return repr(value)


_HASHES: dict[int, tuple[Any, str]] = {}


def ruleset_hash(rules: Any) -> str:
    """A stable hash of compiled rules (ruleset data with the edition options applied): the
    same board and options hash alike whatever the file's name, an edited one differently."""
    held = _HASHES.get(id(rules))
    if held is not None and held[0] is rules:
        return held[1]
    text = json.dumps(_canonical(rules), sort_keys=True, separators=(",", ":"))
    digest = hashlib.sha256(text.encode()).hexdigest()[:16]
    if len(_HASHES) >= 256:  # rules are cached by the games: a few live at once
        _HASHES.clear()
    _HASHES[id(rules)] = (rules, digest)
    return digest


@cache
def breakdown_parts(name: str) -> tuple[str, ...]:
    """The parts of the game ``name``'s score breakdown, in its order (read off a new game
    of its default rules)."""
    game = get(name)
    state, _ = game.new_game(game.rules(game.default_ruleset), game.min_players, 0)
    return tuple(game.results(state)[0].breakdown)


def options_key(options: Mapping[str, Any]) -> str:
    """Options as stored and filtered on: JSON with sorted keys."""
    return json.dumps(dict(options), sort_keys=True)
