"""The subset of JSON Schema that games' options and commands use: check a value against a
schema, and draw values a schema allows.

Options models and command schemas come from pydantic (``model_json_schema``,
:func:`shared.games.api.command_schema`): ``type``, ``enum``, ``const``, ``anyOf``,
``items``, ``properties``, ``required`` and local ``$ref``. Anything else makes these
helpers fail loudly rather than pass silently, so a game with richer schemas extends them.
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

Schema = dict[str, Any]

# Keywords that describe a value without constraining it.
ANNOTATIONS = frozenset({"title", "description", "default", "examples"})
KNOWN = ANNOTATIONS | {
    "$ref",
    "$defs",
    "type",
    "enum",
    "const",
    "anyOf",
    "items",
    "properties",
    "required",
    "additionalProperties",
}
JSON_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "null": (type(None),),
    "array": (list,),
    "object": (dict,),
}


def resolve(schema: Schema, root: Schema) -> Schema:
    """Follow a local ``$ref`` (``#/$defs/Name``): pydantic puts enums and models there."""
    ref = schema.get("$ref")
    if ref is None:
        return schema
    assert ref.startswith("#/$defs/"), f"only local $defs references are supported: {ref}"
    return resolve(root["$defs"][ref.removeprefix("#/$defs/")], root)


def conforms(value: Any, schema: Schema, root: Schema | None = None) -> bool:
    """Whether ``value`` (JSON-like) is allowed by ``schema``."""
    root = schema if root is None else root
    schema = resolve(schema, root)
    unknown = set(schema) - KNOWN
    assert not unknown, f"schema keywords these tests do not understand: {sorted(unknown)}"
    if "anyOf" in schema and not any(conforms(value, s, root) for s in schema["anyOf"]):
        return False
    if "const" in schema and not same_json(value, schema["const"]):
        return False
    if "enum" in schema and not any(same_json(value, v) for v in schema["enum"]):
        return False
    kind = schema.get("type")
    if kind is not None and not is_json_type(value, kind):
        return False
    if isinstance(value, list) and "items" in schema:
        return all(conforms(v, schema["items"], root) for v in value)
    if isinstance(value, dict):
        return object_conforms(value, schema, root)
    return True


def object_conforms(value: dict[str, Any], schema: Schema, root: Schema) -> bool:
    properties = schema.get("properties", {})
    if not set(schema.get("required", ())) <= set(value):
        return False
    extra = schema.get("additionalProperties", True)
    for key, item in value.items():
        if key in properties:
            if not conforms(item, properties[key], root):
                return False
        elif extra is False or (isinstance(extra, dict) and not conforms(item, extra, root)):
            return False
    return True


def is_json_type(value: Any, kind: str) -> bool:
    """JSON types, where a bool is not a number (Python's ``bool`` is an ``int``)."""
    if isinstance(value, bool):
        return kind == "boolean"
    return isinstance(value, JSON_TYPES[kind])


def same_json(a: Any, b: Any) -> bool:
    """Equality as JSON sees it: ``True`` is not ``1``."""
    return type(a) is type(b) and a == b if isinstance(a, bool) or isinstance(b, bool) else a == b


def values(
    schema: Schema,
    root: Schema,
    strings: st.SearchStrategy[str],
    ints: st.SearchStrategy[int],
) -> st.SearchStrategy[Any]:
    """Values of the schema's declared type, not necessarily of its enum: ``strings`` and
    ``ints`` supply plausible and implausible ones (names the game uses, junk, out of
    range numbers)."""
    schema = resolve(schema, root)
    if "anyOf" in schema:
        return st.one_of([values(s, root, strings, ints) for s in schema["anyOf"]])
    if "const" in schema:
        return st.just(schema["const"])
    choices = st.sampled_from(schema["enum"]) if "enum" in schema else st.nothing()
    kind = schema.get("type")
    if kind == "array":
        items = values(schema.get("items", {}), root, strings, ints)
        return st.lists(items, max_size=4)
    by_type: dict[str | None, st.SearchStrategy[Any]] = {
        "string": strings,
        "integer": ints,
        "number": ints,
        "boolean": st.booleans(),
        "null": st.none(),
        None: st.nothing(),
    }
    assert kind in by_type, f"no values for schema type {kind!r}"
    return choices | by_type[kind]


def choices(schema: Schema, root: Schema) -> st.SearchStrategy[Any] | None:
    """The values an option schema offers (an enum, a constant, a boolean), or ``None`` when
    it names no finite set of choices (the option keeps its default)."""
    schema = resolve(schema, root)
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    if "const" in schema:
        return st.just(schema["const"])
    if schema.get("type") == "boolean":
        return st.booleans()
    if "anyOf" in schema:
        offered = [c for s in schema["anyOf"] if (c := choices(s, root)) is not None]
        return st.one_of(offered) if offered else None
    return None
