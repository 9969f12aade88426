"""Event payloads as types: each game declares one class per event type (its ``data``), with
its JSON schema and its version, as commands are declared.

The rules cores keep emitting and applying plain dicts (``Event.data``): the engine and the
bots' search apply events hundreds of thousands of times, and building a model per event
would cost more than the whole step. The classes are the contract: the catalog and the
AsyncAPI document publish their schemas, and the protocol suite validates every event
random play emits against its class, so an event that drifts from its declaration fails.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, ValidationError

from .protocol import Event


class EventData(BaseModel):
    """Base of every game's event payloads: ``type`` is the wire name, ``version`` the
    payload's shape version (1 until a change of shape).

    A change of shape bumps ``version`` and adds the step from the one before as a static
    method named ``upcast_v{n}_v{n+1}`` (as the ``eventsourcing`` library's ``class_version``
    and ``upcast_vX_vY``): it takes the stored ``data`` and returns it in the next shape.
    Logs are read through the steps (:func:`upcast`), so every log written before still
    reads. A step must leave data already in its target shape as it is: a game in progress
    when the change is deployed holds events of both shapes (its ``game_created`` records
    the versions it was created at, not each event's)."""

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
    # The versions of the game's event types above 1 when the log was created
    # (:meth:`~.base.BaseGame.record_versions`); absent when all were at 1.
    event_versions: dict[str, int] | None = None


Upcaster = Callable[[dict[str, Any]], dict[str, Any]]


def upcasters(cls: type[EventData]) -> list[Upcaster]:
    """The steps from version 1 to ``cls.version``; TypeError names a missing one (checked
    when the game registers, not when an old log is first read)."""
    steps = []
    for n in range(1, cls.version):
        step = getattr(cls, f"upcast_v{n}_v{n + 1}", None)
        if not callable(step):
            missing = f"upcast_v{n}_v{n + 1}"
            raise TypeError(f"{cls.type} is at version {cls.version} but has no {missing}")
        steps.append(step)
    return steps


def upcast(cls: type[EventData], data: dict[str, Any], written: int = 1) -> dict[str, Any]:
    """``data`` stored at version ``written`` (1 if unknown), in ``cls``'s current shape."""
    for step in upcasters(cls)[written - 1 :]:
        data = step(data)
    return data


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
