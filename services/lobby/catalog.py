"""The registered games as clients discover them: ``GET /games``, and the per-game shapes the
OpenAPI document shows (each game's commands as the HTTP body takes them, each game's
edition options), all drawn from the registry's catalog."""

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
    levels and the JSON schema of each command."""
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


def options_schema() -> dict[str, Any]:
    """A table's ``options``: one of the games' edition options (of its default ruleset)."""
    return {"anyOf": [{**entry.options, "title": entry.name} for entry in _catalog()]}
