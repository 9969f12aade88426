"""The contracts' one JSON codec (``shared.contracts.codec``)."""

from __future__ import annotations

import json

import pytest

from shared.contracts import dump_json, key_json, load_json, readable_json
from shared.games.api import analytics


def test_compact_json_is_what_json_writes_compactly_and_reads_back() -> None:
    value = {"b": [1, 2.5, None, True], "a": {"x": "y"}}
    assert dump_json(value) == json.dumps(value, separators=(",", ":"))
    assert load_json(dump_json(value)) == value
    assert load_json(dump_json(value).encode()) == value


def test_what_json_has_no_form_for_is_refused_unless_a_fallback_names_it() -> None:
    class Opaque:
        def __str__(self) -> str:
            return "opaque"

    with pytest.raises(ValueError):
        dump_json({"at": Opaque()})
    assert dump_json({"at": Opaque()}, fallback=str) == '{"at":"opaque"}'


def test_text_that_is_not_json_is_a_value_error() -> None:
    for text in ("", "{", "{'a': 1}", "nan-ish"):
        with pytest.raises(ValueError):
            load_json(text)


def test_the_key_form_is_the_one_rows_were_written_in() -> None:
    """Keys are compared as text with rows written before: sorted keys, ``json.dumps``'s
    spacing. The game kernel's options key (below the contracts, it cannot import them)
    writes the same form."""
    options = {"university": "on", "navy_vp_per_ship": 2, "tile_set": "b"}
    assert key_json(options) == '{"navy_vp_per_ship": 2, "tile_set": "b", "university": "on"}'
    assert key_json(["t-1", 4, 0]) == '["t-1", 4, 0]'
    assert analytics.options_key(options) == key_json(options)


def test_readable_json_is_indented_and_reads_back() -> None:
    text = readable_json({"a": [1]})
    assert "\n  " in text and load_json(text) == {"a": [1]}
