"""Rulesets are data: the shipped ruleset loads, and a wrong file is refused naming the field."""

from __future__ import annotations

import copy
import tomllib
from importlib import resources
from pathlib import Path
from typing import Any

import pytest

from shared.games.age_of_discovery import (
    RulesetError,
    available_rulesets,
    compile_rules,
    load_ruleset,
    parse_ruleset,
)


def standard_data() -> dict[str, Any]:
    folder = resources.files("shared.games.age_of_discovery").joinpath("rulesets")
    return tomllib.loads(folder.joinpath("standard.toml").read_text(encoding="utf-8"))


def test_standard_ruleset_matches_the_rulebook_components() -> None:
    """§1: 46 goods in 11 kinds, 9 regions (Caribbean discovered), 16 tokens, 16 cards,
    34 capital buildings in the standard tile set (11/13/10) and 36 in the extended one."""
    ruleset = load_ruleset("standard")
    assert "standard" in available_rulesets()
    assert sum(ruleset.goods.values()) == 46 and len(ruleset.goods) == 11
    assert len(ruleset.regions) == 9
    assert [r.id for r in ruleset.regions if r.discovered] == ["caribbean"]
    assert len(ruleset.tokens) == 16 and len(ruleset.cards) == 16
    standard = compile_rules(ruleset, {})
    assert [len(p) for p in standard.piles] == [11, 13, 10]
    extended = compile_rules(ruleset, {"tile_set": "extended"})
    assert [len(p) for p in extended.piles] == [12, 14, 10]
    assert {"mint", "overpopulation"} <= set(extended.building_index)
    assert "mint" not in standard.building_index


def test_option_values_flow_into_building_effects() -> None:
    """§8 edition options: Navy 4|3 VP per ship, Factory +$25|+$30."""
    ruleset = load_ruleset("standard")
    default = compile_rules(ruleset, {})
    russian = compile_rules(ruleset, {"navy_vp_per_ship": 3, "factory_income": "30"})

    def effect(rules: Any, building: str, kind: str) -> dict[str, Any]:
        return rules.buildings[rules.building_index[building]].effects[kind]

    assert effect(default, "navy", "vp_per")["points"] == 4
    assert effect(russian, "navy", "vp_per")["points"] == 3
    assert effect(default, "factory", "money_each_turn")["amount"] == 25
    assert effect(russian, "factory", "money_each_turn")["amount"] == 30


@pytest.mark.parametrize(
    ("mutate", "field"),
    [
        (lambda d: d["adjacency"].append(["caribbean", "atlantis"]), "adjacency.12"),
        (lambda d: d["goods"].__setitem__("gold", -1), "goods.gold"),
        (lambda d: d["regions"][0].__setitem__("good", "spice"), "regions.0.good"),
        (
            lambda d: d["buildings"][0]["effects"].append({"kind": "teleport"}),
            "buildings.0.effects.1",
        ),
        (lambda d: d["boxes"].__setitem__("warfare_spaces", 0), "boxes.warfare_spaces"),
        (lambda d: d["tokens"].__setitem__(0, [1, 2, 3]), "tokens.0"),
        (lambda d: d.pop("turns"), "turns"),
        (
            lambda d: d["buildings"][-1]["effects"][0].__setitem__("amount", {"option": "nope"}),
            "buildings.34.effects.0.amount",
        ),
    ],
)
def test_a_wrong_ruleset_is_refused_naming_the_field(mutate: Any, field: str) -> None:
    """A ruleset with an unknown region, a negative count or an unknown effect never loads."""
    data = copy.deepcopy(standard_data())
    mutate(data)
    with pytest.raises(RulesetError) as error:
        parse_ruleset(data)
    assert field in str(error.value)


def test_unknown_ruleset_name_and_bad_toml_are_refused(tmp_path: Path) -> None:
    with pytest.raises(RulesetError, match="unknown ruleset 'atlantis'"):
        load_ruleset("atlantis")
    broken = tmp_path / "broken.toml"
    broken.write_text("name = [", encoding="utf-8")
    with pytest.raises(RulesetError, match="invalid ruleset"):
        load_ruleset(broken)


def test_options_are_checked_against_the_ruleset() -> None:
    ruleset = load_ruleset("standard")
    with pytest.raises(RulesetError, match=r"options\.speed: unknown option"):
        compile_rules(ruleset, {"speed": "fast"})
    with pytest.raises(RulesetError, match=r"options\.navy_vp_per_ship: 5 is not one of 4, 3"):
        compile_rules(ruleset, {"navy_vp_per_ship": 5})
    assert compile_rules(ruleset, {"university": "one_forward"}).options["university"] == (
        "one_forward"
    )


def test_a_ruleset_file_on_disk_loads_by_path(tmp_path: Path) -> None:
    """Operators correct reconstructed board values in their own file."""
    folder = resources.files("shared.games.age_of_discovery").joinpath("rulesets")
    text = folder.joinpath("standard.toml").read_text(encoding="utf-8")
    custom = tmp_path / "custom.toml"
    custom.write_text(text.replace("warfare_spaces = 5", "warfare_spaces = 3"), encoding="utf-8")
    assert load_ruleset(custom).boxes.warfare_spaces == 3
