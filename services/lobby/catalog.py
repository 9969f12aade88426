"""The registered games as clients discover them: ``GET /games``, and the per-game shapes the
OpenAPI document shows (each game's commands as the HTTP body takes them, each game's
edition options and views), all drawn from the registry's catalog."""

from __future__ import annotations

from functools import cache
from typing import Any

from fastapi import APIRouter

from shared.games import api
from shared.httpapi import ERRORS

router = APIRouter(tags=["games"])

_catalog = cache(api.catalog)  # games register at import: the catalog never changes


@router.get("/games", response_model=list[api.CatalogEntry], responses=ERRORS)
def list_games() -> list[api.CatalogEntry]:
    """Every game the server hosts: players, rulesets, edition options (JSON schema), bot
    levels and the JSON schemas of each command and of a view."""
    return _catalog()


def command_body_schema() -> dict[str, Any]:
    """``POST /games/{id}/commands``'s body: one of every game's commands, without the
    seat (the token names it) and with an optional ``command_id`` that makes retries safe."""
    shapes = []
    for entry in _catalog():
        for schema in entry.commands.values():
            properties = {k: v for k, v in schema["properties"].items() if k != "seat"}
            properties["command_id"] = {"type": "string", "minLength": 1, "maxLength": 64}
            shapes.append(
                {
                    **schema,
                    "title": f"{entry.name}.{schema['title']}",
                    "properties": properties,
                    "required": [k for k in schema["required"] if k != "seat"],
                }
            )
    return {"oneOf": shapes}


def view_schema() -> dict[str, Any]:
    """``GET /games/{id}/view``'s answer: one of the games' views, each game's schema with its
    ``$defs`` inlined (its local references would not resolve inside the OpenAPI document,
    and inlining keeps games' model names from colliding in its components)."""
    return {"oneOf": [_inline(entry.view, entry.view.get("$defs", {})) for entry in _catalog()]}


def _inline(schema: Any, defs: dict[str, Any]) -> Any:
    """``schema`` with every ``#/$defs/...`` reference replaced by its definition (views'
    schemas are not recursive) and ``$defs`` dropped."""
    if isinstance(schema, list):
        return [_inline(item, defs) for item in schema]
    if not isinstance(schema, dict):
        return schema
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        rest = {k: v for k, v in schema.items() if k != "$ref"}
        return _inline({**defs[ref.removeprefix("#/$defs/")], **rest}, defs)
    return {k: _inline(v, defs) for k, v in schema.items() if k != "$defs"}


def options_schema() -> dict[str, Any]:
    """A table's ``options``: one of the games' edition options (of its default ruleset)."""
    return {"anyOf": [{**entry.options, "title": entry.name} for entry in _catalog()]}


# What the OpenAPI document says a request may hold is what some game accepts: a client (or a
# schema-driven fuzzer) that keeps to it is refused only for what depends on the game chosen
# or on the table's state. The server still checks it all (a 422 naming what is wrong).


def players_schema() -> dict[str, Any]:
    """A table's seats or a queued player's count: from the fewest to the most any game takes."""
    entries = _catalog()
    return {
        "minimum": min(e.min_players for e in entries),
        "maximum": max(e.max_players for e in entries),
    }


def seat_schema() -> dict[str, Any]:
    """A seat number: 0 up to the last seat of the largest table."""
    return {"minimum": 0, "maximum": players_schema()["maximum"] - 1}


def game_schema() -> dict[str, Any]:
    return {"enum": [e.name for e in _catalog()]}


def ruleset_schema() -> dict[str, Any]:
    """A ruleset of some game, or none (the game's default)."""
    return {"enum": [*sorted({r for e in _catalog() for r in e.rulesets}), None]}


def bot_level_schema() -> dict[str, Any]:
    return {"enum": sorted({level for e in _catalog() for level in e.bot_levels})}


def bots_schema() -> dict[str, Any]:
    """A table's bots: seat numbers as keys (JSON keys are strings), bot levels as values."""
    last = seat_schema()["maximum"]
    return {
        "propertyNames": {"enum": [str(seat) for seat in range(last + 1)]},
        "additionalProperties": {"type": "string", **bot_level_schema()},
    }


def bots_within_seats() -> dict[str, Any]:
    """A new table's bots sit at its seats: for each table size, the seat numbers it has."""
    low, high = players_schema()["minimum"], players_schema()["maximum"]
    return {
        "anyOf": [
            {
                "properties": {
                    "seats": {"const": n},
                    "bots": {"propertyNames": {"enum": [str(s) for s in range(n)]}},
                }
            }
            for n in range(low, high + 1)
        ]
    }
