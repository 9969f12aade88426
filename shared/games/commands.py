"""Commands, the one input of every game: small frozen dataclasses naming the seat, their
wire form, their parsing (which refuses anything malformed) and their JSON schemas."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import MISSING, dataclass, fields
from typing import Any, ClassVar

from pydantic import TypeAdapter

from .protocol import RuleViolation


@dataclass(frozen=True, slots=True)
class Command:
    """Base of every game's commands: a small frozen dataclass naming the seat.

    ``type`` is the wire name. Fields may be ``int``, ``str``, ``bool``, their ``| None``
    forms and ``tuple[str, ...]``: what :func:`parse_command` checks and JSON carries.
    """

    type: ClassVar[str] = "command"
    seat: int

    def to_dict(self) -> dict[str, Any]:
        """The wire form: ``type`` plus every field (tuples as lists)."""
        out: dict[str, Any] = {"type": self.type}
        for name, _, _ in _specs(type(self)):
            value = getattr(self, name)
            out[name] = list(value) if isinstance(value, tuple) else value
        return out


_FIELD_TYPES: dict[str, type | tuple[type, ...]] = {
    "int": int,
    "str": str,
    "bool": bool,
    "int | None": (int, type(None)),
    "str | None": (str, type(None)),
}
_SPECS: dict[type[Command], tuple[tuple[str, str, bool], ...]] = {}


def _specs(cls: type[Command]) -> tuple[tuple[str, str, bool], ...]:
    """(name, declared type, has a default) for each field of a command class, once."""
    specs = _SPECS.get(cls)
    if specs is None:
        specs = _SPECS[cls] = tuple(
            (f.name, str(f.type), f.default is not MISSING) for f in fields(cls)
        )
    return specs


def parse_command(raw: Any, types: Mapping[str, type[Command]]) -> Command:
    """Parse a command of one of ``types`` from JSON-like data, refusing anything malformed
    with a :class:`RuleViolation` (``malformed`` or ``unknown_command``)."""
    if not isinstance(raw, dict):
        raise RuleViolation("malformed", "a command is a JSON object")
    kind = raw.get("type")
    cls = types.get(kind) if isinstance(kind, str) else None
    if cls is None:
        raise RuleViolation("unknown_command", f"unknown command type {kind!r}")
    specs = _specs(cls)
    args: dict[str, Any] = {}
    for name, declared, has_default in specs:
        if name not in raw:
            if has_default:
                continue
            raise RuleViolation("malformed", f"{kind}: missing field {name!r}")
        value = raw[name]
        if declared == "tuple[str, ...]":
            if not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
                raise RuleViolation("malformed", f"{kind}.{name}: expected a list of strings")
            value = tuple(value)
        elif isinstance(value, bool) != (declared == "bool") or not isinstance(
            value, _FIELD_TYPES[declared]
        ):
            raise RuleViolation("malformed", f"{kind}.{name}: expected {declared}")
        args[name] = value
    if len(raw) > len(args) + 1:
        unknown = set(raw) - {name for name, _, _ in specs} - {"type"}
        if unknown:
            raise RuleViolation("malformed", f"{kind}: unknown fields {sorted(unknown, key=str)}")
    return cls(**args)


def command_schema(cls: type[Command]) -> dict[str, Any]:
    """The JSON schema of one command's wire form (for the catalog and OpenAPI)."""
    schema = TypeAdapter(cls).json_schema()
    schema["title"] = cls.type
    schema["properties"] = {"type": {"const": cls.type}, **schema.get("properties", {})}
    schema["required"] = ["type", *schema.get("required", [])]
    if cls.__doc__ and cls.__doc__ != Command.__doc__:
        schema["description"] = " ".join(cls.__doc__.split())
    return schema


def command_wire_schema(cls: type[Command]) -> dict[str, Any]:
    """The JSON schema of a command exactly as :meth:`Command.to_dict` writes it (a view's
    legal commands): every field present, defaults included, and nothing else."""
    schema = command_schema(cls)
    schema["required"] = list(schema["properties"])
    schema["additionalProperties"] = False
    return schema
