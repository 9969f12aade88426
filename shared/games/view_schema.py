"""What every game's view model (its ``view_model`` module) builds the same way: the rules a
view names, a legal command's schema from the game's command types, and the one schema of a
view that is either a seat's or a spectator's."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NotRequired

from pydantic import TypeAdapter
from typing_extensions import TypedDict

from .commands import Command, command_wire_schema


class ViewRules(TypedDict):
    """What every view holds first: the rules its game is played under."""

    ruleset: str
    options: dict[str, str | int]
    ruleset_file: NotRequired[str]  # a ruleset given as a file: the file's text


def legal_command_schema(types: Mapping[str, type[Command]]) -> dict[str, Any]:
    """One of the game's commands, as ``to_dict`` writes it."""
    return {"oneOf": [command_wire_schema(c) for c in types.values()]}


def seat_or_spectator(seat_view: Any, spectator_view: Any, title: str) -> dict[str, Any]:
    """The JSON schema of a view, a seat's or a spectator's (``$defs`` referenced locally).
    The two differ in ``seat`` (an integer or null): exactly one matches, hence ``oneOf``."""
    schema = TypeAdapter(seat_view | spectator_view).json_schema()
    schema["oneOf"] = schema.pop("anyOf")
    schema["title"] = title
    return schema
