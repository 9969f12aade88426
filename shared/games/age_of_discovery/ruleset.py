"""Rulesets: the board as data, validated by pydantic, compiled into fast lookup tables.

A ruleset file (TOML, shipped in ``rulesets/``) holds everything printed on the board or
the tiles: map, goods, event-box sizes, tokens, cards, capital buildings and the edition
options. The engine only holds mechanics. :func:`load_ruleset` refuses a wrong file with a
message naming the field; :func:`compile_rules` turns a ruleset plus chosen options into the
index-based :class:`Rules` the engine runs on.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from functools import cached_property
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from ..protocol import RulesetError
from ..ruleset_files import RulesetFiles

UNITS: tuple[str, ...] = ("colonist", "captain", "merchant", "missionary", "soldier")
"""Unit types, by index. Mechanics, not board data: every edition has these five."""

COLONIST, CAPTAIN, MERCHANT, MISSIONARY, SOLDIER = range(5)
SPECIALISTS: tuple[int, ...] = (CAPTAIN, MERCHANT, MISSIONARY, SOLDIER)

UnitName = Literal["colonist", "captain", "merchant", "missionary", "soldier"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class OptionRef(_Model):
    """A number taken from an edition option, e.g. ``{ option = "factory_income" }``."""

    option: str


Amount = int | OptionRef


class GrantUnit(_Model):
    kind: Literal["grant_unit"]
    unit: UnitName
    count: Annotated[int, Field(ge=1)] = 1


class MoneyEachTurn(_Model):
    kind: Literal["money_each_turn"]
    amount: Amount


class MoneyOnce(_Model):
    kind: Literal["money_once"]
    amount: Amount


class FixedVP(_Model):
    kind: Literal["vp"]
    points: Amount


class DockColonist(_Model):
    kind: Literal["dock_colonist"]
    space: Literal["X", "Y"]


class DiscoveryUnit(_Model):
    kind: Literal["discovery_unit"]
    unit: UnitName


class FreeDiscovery(_Model):
    kind: Literal["free_discovery"]


class IndianAllies(_Model):
    kind: Literal["indian_allies"]
    soldiers: Annotated[int, Field(ge=1)]


class Privateers(_Model):
    kind: Literal["privateers"]
    per_ship: Annotated[int, Field(ge=1)]


class MissionaryBonus(_Model):
    kind: Literal["missionary_bonus"]
    colonists: Annotated[int, Field(ge=1)]


class University(_Model):
    kind: Literal["university"]


class RandomGood(_Model):
    kind: Literal["random_good"]


class IncomePerGood(_Model):
    kind: Literal["income_per_good"]
    goods: list[str]
    amount: Amount


class Stable(_Model):
    kind: Literal["stable"]
    soldiers: Annotated[int, Field(ge=1)]


class Militia(_Model):
    kind: Literal["militia"]
    soldiers: Annotated[int, Field(ge=1)]


class Migration(_Model):
    kind: Literal["migration"]
    colonists: Annotated[int, Field(ge=1)]


class PlaceColonists(_Model):
    kind: Literal["place_colonists"]
    count: Annotated[int, Field(ge=1)]


class VPPer(_Model):
    kind: Literal["vp_per"]
    count: Literal["goods", "units", "ships", "soldiers", "buildings", "regions", "money"]
    points: Amount
    per: Annotated[int, Field(ge=1)] = 1


Effect = Annotated[
    GrantUnit
    | MoneyEachTurn
    | MoneyOnce
    | FixedVP
    | DockColonist
    | DiscoveryUnit
    | FreeDiscovery
    | IndianAllies
    | Privateers
    | MissionaryBonus
    | University
    | RandomGood
    | IncomePerGood
    | Stable
    | Militia
    | Migration
    | PlaceColonists
    | VPPer,
    Field(discriminator="kind"),
]

NonNegative = Annotated[int, Field(ge=0)]
Positive = Annotated[int, Field(ge=1)]


class Building(_Model):
    id: str
    name: str
    age: Annotated[int, Field(ge=1, le=3)]
    copies: Positive = 1
    requires: dict[str, str | int] = {}
    effects: list[Effect]


class Region(_Model):
    id: str
    name: str
    good: str
    discovered: bool = False


class Nation(_Model):
    color: str
    name: str


class Card(_Model):
    name: str
    stats: Annotated[list[NonNegative], Field(min_length=4, max_length=4)]


class Boxes(_Model):
    initiative_spaces: Positive
    dock_spaces_per_player: Positive
    dock_spaces_offset: int
    trade_goods_spaces: Positive
    capital_buildings_spaces: Positive
    warfare_spaces: Positive
    revealed_goods: Positive
    revealed_buildings: Positive


class Values(_Model):
    ships: NonNegative
    merchant_arrival_money: NonNegative
    missionary_colonists: NonNegative
    training_cost: NonNegative
    war_cost: NonNegative
    shipping_value: dict[UnitName, NonNegative]
    discovery_value: dict[UnitName, NonNegative]
    colony_min_units: Positive
    colony_first_vp: NonNegative
    colony_second_vp: NonNegative
    colony_tied_first_vp: NonNegative
    set_any_three: NonNegative
    set_three_same: NonNegative
    set_four_same: NonNegative
    auction_bonus_min_bid: NonNegative


REQUIRED_OPTIONS = ("tile_set", "university", "starting_order")


class Ruleset(_Model):
    """A whole ruleset file. Cross-references are checked so that a typo fails at load."""

    name: str
    title: str
    min_players: Annotated[int, Field(ge=2)]
    max_players: Annotated[int, Field(ge=2)]
    turns: Positive
    age_end_turns: Annotated[list[Positive], Field(min_length=3, max_length=3)]
    building_prices: Annotated[list[NonNegative], Field(min_length=3, max_length=3)]
    starting_money: NonNegative
    colonists_per_turn: NonNegative
    compensation: list[NonNegative]
    boxes: Boxes
    values: Values
    nations: list[Nation]
    goods: dict[str, NonNegative]
    regions: Annotated[list[Region], Field(min_length=1)]
    adjacency: list[Annotated[list[str], Field(min_length=2, max_length=2)]]
    tokens: list[Annotated[list[NonNegative], Field(min_length=4, max_length=4)]]
    cards: list[Card]
    options: dict[str, Annotated[list[str | int], Field(min_length=1)]]
    buildings: list[Building]

    @model_validator(mode="after")
    def _cross_references(self) -> Ruleset:
        problems: list[str] = []
        region_ids = [r.id for r in self.regions]
        if len(set(region_ids)) != len(region_ids):
            problems.append("regions: duplicate region id")
        for i, region in enumerate(self.regions):
            if region.good not in self.goods:
                problems.append(f"regions.{i}.good: unknown good {region.good!r}")
        for i, pair in enumerate(self.adjacency):
            for name in pair:
                if name not in region_ids:
                    problems.append(f"adjacency.{i}: unknown region {name!r}")
        if self.max_players < self.min_players:
            problems.append("max_players: smaller than min_players")
        if len(self.nations) < self.max_players:
            problems.append("nations: fewer nations than max_players")
        if len(self.compensation) < self.max_players:
            problems.append("compensation: fewer entries than max_players")
        if self.age_end_turns[-1] != self.turns or self.age_end_turns != sorted(self.age_end_turns):
            problems.append("age_end_turns: must increase and end with the last turn")
        hidden = sum(1 for r in self.regions if not r.discovered)
        if len(self.tokens) < hidden:
            problems.append("tokens: fewer tokens than undiscovered regions")
        for name in REQUIRED_OPTIONS:
            if name not in self.options:
                problems.append(f"options.{name}: missing")
        ids = [b.id for b in self.buildings]
        if len(set(ids)) != len(ids):
            problems.append("buildings: duplicate building id")
        for i, building in enumerate(self.buildings):
            problems += self._check_building(i, building)
        if problems:
            raise ValueError("; ".join(problems))
        return self

    def _check_building(self, i: int, building: Building) -> list[str]:
        problems = []
        for key, value in building.requires.items():
            if value not in self.options.get(key, []):
                problems.append(f"buildings.{i}.requires.{key}: unknown choice {value!r}")
        for j, effect in enumerate(building.effects):
            where = f"buildings.{i}.effects.{j}"
            for field, value in effect:
                if isinstance(value, OptionRef):
                    choices = self.options.get(value.option)
                    if choices is None:
                        problems.append(f"{where}.{field}: unknown option {value.option!r}")
                    elif not all(isinstance(c, int) for c in choices):
                        problems.append(f"{where}.{field}: option {value.option!r} is not numeric")
            if isinstance(effect, IncomePerGood):
                problems += [
                    f"{where}.goods: unknown good {g!r}"
                    for g in effect.goods
                    if g not in self.goods
                ]
        return problems


FILES = RulesetFiles(__package__, Ruleset)


# The loaders the game's modules and tests call by name.
parse_ruleset = FILES.parse
available_rulesets = FILES.available
load_ruleset = FILES.load
loads_ruleset = FILES.loads


# ---------------------------------------------------------------------------------------------
# Compiled form: plain tuples indexed by integers, built once per (ruleset, options).


@dataclass(frozen=True, slots=True)
class CompiledBuilding:
    """A capital building with option references resolved; effects keyed by kind."""

    index: int
    id: str
    name: str
    age: int
    effects: dict[str, Any]


@dataclass(frozen=True)
class Rules:
    """The ruleset as the engine sees it: immutable, integer-indexed, options applied."""

    ruleset: Ruleset
    options: dict[str, str | int]
    goods: tuple[str, ...]
    good_counts: tuple[int, ...]
    regions: tuple[str, ...]
    region_good: tuple[int, ...]
    start_discovered: tuple[bool, ...]
    adjacent: tuple[frozenset[int], ...]
    tokens: tuple[tuple[int, int, int, int], ...]
    cards: tuple[tuple[int, int, int, int], ...]
    buildings: tuple[CompiledBuilding, ...]
    piles: tuple[tuple[int, ...], ...]  # building indices per age, one entry per copy
    file: str | None = dataclasses.field(default=None, compare=False, hash=False, repr=False)
    """A ruleset given as a file: its text, which the log, snapshots and views carry
    (``ruleset_files.CARRIED``) so that nothing looks it up by name. None: a shipped one."""

    @cached_property
    def good_index(self) -> dict[str, int]:
        return {g: i for i, g in enumerate(self.goods)}

    @cached_property
    def region_index(self) -> dict[str, int]:
        return {r: i for i, r in enumerate(self.regions)}

    @cached_property
    def building_index(self) -> dict[str, int]:
        return {b.id: b.index for b in self.buildings}

    @cached_property
    def building_ids(self) -> tuple[str, ...]:
        """Each building's id, by index (the greedy policy names the ones on offer)."""
        return tuple(b.id for b in self.buildings)

    @cached_property
    def _spaces(self) -> dict[int, tuple[int, int, int, int, int]]:
        return {}

    def spaces(self, players: int) -> tuple[int, int, int, int, int]:
        """Spaces of Initiative, Colonist Dock (numbered), Trade Goods, Capital Buildings and
        Warfare for a player count."""
        cached = self._spaces.get(players)
        if cached is None:
            b = self.ruleset.boxes
            cached = self._spaces[players] = (
                min(b.initiative_spaces, players),
                self.dock_spaces(players),
                b.trade_goods_spaces,
                b.capital_buildings_spaces,
                b.warfare_spaces,
            )
        return cached

    def dock_spaces(self, players: int) -> int:
        b = self.ruleset.boxes
        return b.dock_spaces_per_player * players + b.dock_spaces_offset

    @cached_property
    def _ages(self) -> tuple[int, ...]:
        """The age of every turn up to the last age's end (turn 0 included), by turn."""
        ends = self.ruleset.age_end_turns
        return tuple(self._age_of(turn) for turn in range(max(ends) + 1))

    def _age_of(self, turn: int) -> int:
        return next(i for i, end in enumerate(self.ruleset.age_end_turns, 1) if turn <= end)

    def age_of_turn(self, turn: int) -> int:
        """The age a turn belongs to (looked up: the search asks at every step)."""
        ages = self._ages
        return ages[turn] if 0 <= turn < len(ages) else self._age_of(turn)


def resolve_options(ruleset: Ruleset, options: dict[str, Any] | None) -> dict[str, str | int]:
    """Fill defaults (each option's first choice) and refuse unknown options or choices."""
    chosen: dict[str, str | int] = {k: v[0] for k, v in ruleset.options.items()}
    for key, value in (options or {}).items():
        choices = ruleset.options.get(key)
        if choices is None:
            raise RulesetError(
                f"options.{key}: unknown option; known: {', '.join(ruleset.options)}"
            )
        match = next((c for c in choices if str(c) == str(value)), None)
        if match is None:
            raise RulesetError(
                f"options.{key}: {value!r} is not one of {', '.join(map(str, choices))}"
            )
        chosen[key] = match
    return chosen


def compile_rules(
    ruleset: Ruleset, options: dict[str, Any] | None = None, file: str | None = None
) -> Rules:
    """Build the engine's :class:`Rules` for a ruleset and edition options; ``file``: the
    ruleset file's text when it was given as a file (:attr:`Rules.file`)."""
    chosen = resolve_options(ruleset, options)
    goods = tuple(ruleset.goods)
    regions = tuple(r.id for r in ruleset.regions)
    region_at = {r: i for i, r in enumerate(regions)}
    adjacent: list[set[int]] = [set() for _ in regions]
    for a, b in ruleset.adjacency:
        adjacent[region_at[a]].add(region_at[b])
        adjacent[region_at[b]].add(region_at[a])

    def value(v: Any) -> Any:
        return chosen[v.option] if isinstance(v, OptionRef) else v

    buildings: list[CompiledBuilding] = []
    piles: list[list[int]] = [[], [], []]
    for tile in ruleset.buildings:
        if any(chosen.get(k) != v for k, v in tile.requires.items()):
            continue
        effects: dict[str, Any] = {
            e.kind: {k: value(v) for k, v in e if k != "kind"} for e in tile.effects
        }
        compiled = CompiledBuilding(len(buildings), tile.id, tile.name, tile.age, effects)
        buildings.append(compiled)
        piles[tile.age - 1] += [compiled.index] * tile.copies
    return Rules(
        ruleset=ruleset,
        options=chosen,
        goods=goods,
        good_counts=tuple(ruleset.goods.values()),
        regions=regions,
        region_good=tuple(goods.index(r.good) for r in ruleset.regions),
        start_discovered=tuple(r.discovered for r in ruleset.regions),
        adjacent=tuple(frozenset(a) for a in adjacent),
        tokens=tuple(tuple(t) for t in ruleset.tokens),  # type: ignore[misc]
        cards=tuple(tuple(c.stats) for c in ruleset.cards),  # type: ignore[misc]
        buildings=tuple(buildings),
        piles=tuple(tuple(p) for p in piles),
        file=file,
    )
