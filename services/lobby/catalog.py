"""The registered games as clients discover them: ``GET /games``, and the per-game shapes the
OpenAPI document shows (each game's commands as the HTTP body takes them, each game's
edition options and views), all drawn from the registry's catalog."""

from __future__ import annotations

from collections.abc import Callable
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


def schema_ref(name: str) -> dict[str, Any]:
    return {"$ref": f"#/components/schemas/{name}"}


def game_components() -> dict[str, Any]:
    """The OpenAPI components that type a game for a generated client, for every game: each
    command as a move's body takes it (``{Game}{Command}``: no seat, the token names it, and
    an optional ``command_id`` that makes retries safe) and as a view lists it
    (``{Game}{Command}Legal``: every field), each a union discriminated on ``type``
    (``{Game}Command``, ``{Game}LegalCommand``); its view (``{Game}View``, its ``$defs`` as
    ``{Game}{Name}``); and over all games ``Command``, ``LegalCommand`` and ``View``."""
    components: dict[str, Any] = {}
    for entry in _catalog():
        game = _pascal(entry.name)
        for kind, schema in entry.commands.items():
            named = f"{game}{_pascal(kind)}"
            _add(components, f"{named}Command", _body(schema))
            _add(components, f"{named}LegalCommand", _wire(schema))
        for union in ("Command", "LegalCommand"):
            members = {kind: f"{game}{_pascal(kind)}{union}" for kind in entry.commands}
            _add(components, f"{game}{union}", _union(members))
        view = _rename(entry.view, game, f"{game}LegalCommand")
        for name, definition in view.pop("$defs", {}).items():
            _add(components, f"{game}{name}", definition)
        _add(components, f"{game}View", view)
    for union in ("Command", "LegalCommand", "View"):
        games = [f"{_pascal(e.name)}{union}" for e in _catalog()]
        _add(components, union, {"oneOf": [schema_ref(name) for name in games]})
    return components


def _add(components: dict[str, Any], name: str, schema: dict[str, Any]) -> dict[str, Any]:
    """Add a component, titled with its name (generated clients name their classes after the
    titles); two of one name (a view's model named like a command) fail loudly."""
    if name in components:
        raise ValueError(f"two OpenAPI components named {name}")
    components[name] = {**schema, "title": name}
    return schema


def _pascal(name: str) -> str:
    return "".join(part.capitalize() for part in name.split("_"))


def _typed_const(schema: dict[str, Any]) -> dict[str, Any]:
    """A command schema whose ``type`` says it is a string (a discriminator must be one)."""
    properties = {
        **schema["properties"],
        "type": {"type": "string", **schema["properties"]["type"]},
    }
    return {**schema, "properties": properties}


def _body(schema: dict[str, Any]) -> dict[str, Any]:
    properties = {k: v for k, v in schema["properties"].items() if k != "seat"}
    properties["command_id"] = {"type": "string", "minLength": 1, "maxLength": 64}
    return _typed_const(
        {
            **schema,
            "properties": properties,
            "required": [k for k in schema["required"] if k != "seat"],
        }
    )


def _wire(schema: dict[str, Any]) -> dict[str, Any]:
    """A command exactly as a view lists it (``api.command_wire_schema``'s shape)."""
    required = list(schema["properties"])
    return _typed_const({**schema, "required": required, "additionalProperties": False})


def _union(members: dict[str, str]) -> dict[str, Any]:
    """One of ``members`` (command type -> component), told apart by ``type``."""
    return {
        "oneOf": [schema_ref(name) for name in members.values()],
        "discriminator": {
            "propertyName": "type",
            "mapping": {kind: schema_ref(name)["$ref"] for kind, name in members.items()},
        },
    }


def _rename(schema: Any, game: str, legal: str) -> Any:
    """A game's view schema for the OpenAPI components: its ``#/$defs/X`` references as
    ``{game}X`` components (games' model names then never collide), and the legal
    commands a seat's view lists as the game's ``LegalCommand`` union."""
    if isinstance(schema, list):
        return [_rename(item, game, legal) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: _rename(v, game, legal) for k, v in schema.items()}
    ref = out.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        out["$ref"] = schema_ref(game + ref.removeprefix("#/$defs/"))["$ref"]
    commands = out.get("properties", {}).get("legal_commands")
    if isinstance(commands, dict) and "items" in commands:
        commands["items"] = schema_ref(legal)
    return out


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


def nullable(enum: dict[str, Any]) -> Callable[[dict[str, Any]], None]:
    """For ``json_schema_extra`` of an optional string field: one of ``enum``'s strings, or
    null (pydantic's ``anyOf`` with the enum inside its string branch, where generated
    clients look for it)."""

    def narrow(schema: dict[str, Any]) -> None:
        schema["anyOf"] = [{"type": "string", **enum}, {"type": "null"}]

    return narrow


def bots_schema() -> dict[str, Any]:
    """A table's bots: seat numbers as keys (JSON keys are strings), bot levels as values."""
    last = seat_schema()["maximum"]
    return {
        "propertyNames": {"enum": [str(seat) for seat in range(last + 1)]},
        "additionalProperties": {"type": "string", **bot_level_schema()},
    }


def bots_within_seats() -> dict[str, Any]:
    """A new table's bots sit at its seats: no table of ``n`` seats has a bot at a seat
    number outside ``0..n-1``. Said as a ``not`` (rather than an ``anyOf`` of the allowed
    shapes), which generated clients ignore instead of splitting the model into partial
    variants."""
    low, high = players_schema()["minimum"], players_schema()["maximum"]
    return {
        "not": {
            "anyOf": [
                {
                    "required": ["seats", "bots"],
                    "properties": {
                        "seats": {"const": n},
                        "bots": {"not": {"propertyNames": {"enum": [str(s) for s in range(n)]}}},
                    },
                }
                for n in range(low, high + 1)
            ]
        }
    }
