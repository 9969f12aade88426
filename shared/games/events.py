"""Event payloads as types: each game declares one class per event type (its ``data``), with
its JSON schema and its version, as commands are declared.

The rules cores keep emitting and applying plain dicts (``Event.data``): the engine and the
bots' search apply events hundreds of thousands of times, and building a model per event
would cost more than the whole step. The classes are the contract: the catalog and the
AsyncAPI document publish their schemas, and the protocol suite validates every event
random play emits against its class, so an event that drifts from its declaration fails.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, ValidationError

from .protocol import Event


class EventData(BaseModel):
    """Base of every game's event payloads: ``type`` is the wire name, ``version`` the
    payload's shape version (1 until a change of shape, which then names its upcaster)."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, populate_by_name=True)
    type: ClassVar[str] = "event"
    version: ClassVar[int] = 1


class GameCreated(EventData):
    """Every log's first event, whatever the game: what its replay needs to begin."""

    type: ClassVar[str] = "game_created"
    game: str
    ruleset: str
    ruleset_file: str | None = None  # a ruleset given as a file travels with its game
    options: dict[str, Any]
    players: list[str]


def event_types(classes: Iterable[type[EventData]]) -> dict[str, type[EventData]]:
    """A game's event classes by wire name."""
    return {cls.type: cls for cls in classes}


def event_schema(cls: type[EventData]) -> dict[str, Any]:
    """The JSON schema of one event type's ``data`` (for the catalog and AsyncAPI)."""
    schema = cls.model_json_schema(by_alias=True)
    schema["title"] = cls.type
    schema["x-version"] = cls.version
    if cls.__doc__ and cls.__doc__ != EventData.__doc__:
        schema["description"] = " ".join(cls.__doc__.split())
    return schema


def check_event(event: Event, types: Mapping[str, type[EventData]]) -> str | None:
    """Why ``event``'s data does not match its declared class (``None``: it does)."""
    cls = types.get(event.type)
    if cls is None:
        return f"undeclared event type {event.type!r}"
    try:
        cls.model_validate(event.data)
    except ValidationError as e:
        return f"{event.type}: {e}"
    return None
