"""Navegador's rulesets: the board as data, validated by pydantic, compiled to index tables.

A ruleset file (TOML, shipped in ``rulesets/``) holds every number printed on the board,
the colony tokens and the player sheet: map and borders, colony stacks, token prices, the
market table, building price tracks, the sheet's columns, the gallery, the starting
material and the rondel. :func:`load_ruleset` refuses a wrong file with a message naming the
field; :func:`compile_rules` turns it into the integer-indexed :class:`Rules` the engine
runs on. A house ruleset may change any of it, the map included.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from ..protocol import RulesetError
from ..ruleset_files import RulesetFiles

ACTIONS = ("sailing", "workers", "market", "colony", "privilege", "ships", "buildings")
"""The rondel's actions: mechanics, every edition has these (a board orders them)."""

COLUMNS = ("colony", "factory", "explorer", "shipyard", "church")
"""The player sheet's columns, left to right: what privileges reward."""

Positive = Annotated[int, Field(ge=1)]
NonNegative = Annotated[int, Field(ge=0)]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class PlayerStart(_Model):
    money: NonNegative
    workers: Positive
    min_workers: NonNegative
    max_workers: Positive
    ships: Positive
    ships_at_home: NonNegative
    wildcard_factories: NonNegative
    shipyards: NonNegative
    churches: NonNegative

    @model_validator(mode="after")
    def _fits(self) -> PlayerStart:
        if not self.min_workers <= self.workers <= self.max_workers:
            raise ValueError("workers must lie between min_workers and max_workers")
        if self.ships_at_home > self.ships:
            raise ValueError("ships_at_home exceeds ships")
        return self


class Prices(_Model):
    facility: NonNegative
    per_phase: NonNegative
    virtual_sale: NonNegative
    money_per_vp: Positive


class Rondel(_Model):
    fields: Annotated[list[str], Field(min_length=2)]
    free_steps: NonNegative

    @model_validator(mode="after")
    def _actions(self) -> Rondel:
        unknown = sorted(set(self.fields) - set(ACTIONS))
        if unknown:
            raise ValueError(f"unknown actions {unknown}; known: {', '.join(ACTIONS)}")
        return self


class Region(_Model):
    id: str
    name: str
    good: str | None = None
    stack: NonNegative = 0
    double_loss_up_to: NonNegative = 0
    starts_phase: Annotated[int, Field(ge=2)] | None = None
    ends_game: bool = False


class Map(_Model):
    home: str
    sailing_range: Annotated[list[Positive], Field(min_length=1)]
    borders: list[Annotated[list[str], Field(min_length=2, max_length=2)]]
    regions: Annotated[list[Region], Field(min_length=2)]


class Good(_Model):
    id: str
    tokens: Annotated[list[Positive], Field(min_length=1)]
    removed: NonNegative


class Market(_Model):
    start_row: Positive
    rows: Annotated[list[dict[str, NonNegative]], Field(min_length=1)]


class Building(_Model):
    id: str
    column: str
    good: str | None = None
    workers: NonNegative
    pieces: NonNegative
    prices: Annotated[list[NonNegative], Field(min_length=1)]


class Position(_Model):
    coin: NonNegative
    vp: NonNegative


class Column(_Model):
    id: str
    base_vp: NonNegative
    positions: Annotated[list[Position], Field(min_length=1)]
    king_vp: NonNegative


class Gallery(_Model):
    start: NonNegative
    supply: NonNegative
    reset: dict[str, list[NonNegative]]


class Ruleset(_Model):
    """A whole ruleset file; cross-references are checked after the parts."""

    name: str
    title: str
    min_players: Positive
    max_players: Positive
    player: PlayerStart
    prices: Prices
    rondel: Rondel
    map: Map
    goods: Annotated[list[Good], Field(min_length=1)]
    market: Market
    buildings: Annotated[list[Building], Field(min_length=1)]
    columns: list[Column]
    gallery: Gallery

    @model_validator(mode="after")
    def _cross_references(self) -> Ruleset:
        errors = self._errors()
        if errors:
            raise ValueError("; ".join(errors))
        return self

    def _errors(self) -> list[str]:
        errors: list[str] = []
        goods = [g.id for g in self.goods]
        regions = [r.id for r in self.map.regions]
        if self.min_players > self.max_players:
            errors.append("min_players exceeds max_players")
        if len(set(goods)) != len(goods) or len(set(regions)) != len(regions):
            errors.append("goods and map.regions need distinct ids")
        if self.map.home not in regions:
            errors.append(f"map.home: {self.map.home!r} is not a region")
        for i, (a, b) in enumerate(self.map.borders):
            if a not in regions or b not in regions or a == b:
                errors.append(f"map.borders.{i}: {a!r}-{b!r} does not join two regions")
        stacked = {g: 0 for g in goods}
        for i, r in enumerate(self.map.regions):
            if r.id == self.map.home and (r.good or r.stack):
                errors.append(f"map.regions.{i}: the home region holds no colonies")
            elif r.id != self.map.home and r.good not in stacked:
                errors.append(f"map.regions.{i}.good: {r.good!r} is not a good")
            elif r.good is not None:
                stacked[r.good] += r.stack
            if r.starts_phase is not None and r.starts_phase > len(self.map.sailing_range):
                errors.append(f"map.regions.{i}.starts_phase: no phase {r.starts_phase}")
        for i, g in enumerate(self.goods):
            if len(set(g.tokens)) != len(g.tokens):
                errors.append(f"goods.{i}.tokens: prices must be distinct")
            if stacked[g.id] + g.removed != len(g.tokens):
                errors.append(
                    f"goods.{i}: {len(g.tokens)} tokens, but the stacks hold {stacked[g.id]} "
                    f"and {g.removed} are removed"
                )
        if not 1 <= self.market.start_row <= len(self.market.rows):
            errors.append("market.start_row: not a row of market.rows")
        for i, row in enumerate(self.market.rows):
            if set(row) != {*goods, "factory"}:
                errors.append(f"market.rows.{i}: needs a price for each good and 'factory'")
        for i, building in enumerate(self.buildings):
            if building.column not in ("factory", "shipyard", "church"):
                errors.append(f"buildings.{i}.column: {building.column!r} is not a building column")
            if (building.column == "factory") != (building.good in goods):
                errors.append(f"buildings.{i}.good: a factory names its good, nothing else does")
        if [c.id for c in self.columns] != list(COLUMNS):
            errors.append(f"columns: need exactly {', '.join(COLUMNS)}, in that order")
        phases = len(self.map.sailing_range)
        for players in range(self.min_players, self.max_players + 1):
            counts = self.gallery.reset.get(str(players))
            if counts is None or len(counts) != phases - 1:
                errors.append(f"gallery.reset.{players}: needs {phases - 1} counts")
        return errors


FILES = RulesetFiles(__package__, Ruleset)


# The loaders the game's modules and tests call by name.
parse_ruleset = FILES.parse
load_ruleset = FILES.load


# --- compiled form ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Track:
    """A building price track: what it adds to, the workers it needs, its prices."""

    id: str
    column: int  # index in COLUMNS
    good: int  # factory's good, -1 for shipyards and churches
    workers: int
    prices: tuple[int, ...]
    pieces: int
    starting: int  # how many each player starts with (taken out of the pieces)

    def on_board(self, players: int) -> int:
        return max(0, min(len(self.prices), self.pieces - self.starting * players))


@dataclass(frozen=True)
class Rules:
    """The ruleset as the engine sees it: immutable, integer-indexed."""

    ruleset: Ruleset
    regions: tuple[str, ...]
    region_names: tuple[str, ...]  # as printed
    home: int
    adjacent: tuple[tuple[int, ...], ...]
    region_good: tuple[int, ...]  # -1: no colonies (home)
    stack_size: tuple[int, ...]
    double_loss_up_to: tuple[int, ...]
    starts_phase: tuple[int, ...]  # 0: none
    ends_game: tuple[bool, ...]
    goods: tuple[str, ...]
    tokens: tuple[tuple[int, ...], ...]  # per good, ascending
    removed: tuple[int, ...]
    fields: tuple[str, ...]  # rondel fields, clockwise
    prices: tuple[tuple[int, ...], ...]  # market row x good
    factory_income: tuple[int, ...]  # per market row
    tracks: tuple[Track, ...]
    base_vp: tuple[int, ...]
    coins: tuple[tuple[int, ...], ...]  # column x position
    position_vp: tuple[tuple[int, ...], ...]
    king_vp: tuple[int, ...]
    ranges: tuple[int, ...]  # sailing range per phase (index phase - 1)
    file: str | None = field(default=None, compare=False, hash=False, repr=False)
    """A ruleset given as a file: its text, which the log, snapshots and views carry
    (``ruleset_files.CARRIED``) so that nothing looks it up by name. None: a shipped one."""
    _distances: dict[tuple[int, int], tuple[int, ...]] = field(
        default_factory=dict, compare=False, hash=False, repr=False
    )
    _rondel: dict[tuple[int, int], tuple[tuple[int, int, int], ...]] = field(
        default_factory=dict, compare=False, hash=False, repr=False
    )
    _targets: dict[tuple[int, int, int], tuple[int, ...]] = field(
        default_factory=dict, compare=False, hash=False, repr=False
    )

    def region_index(self, name: str) -> int:
        return self.regions.index(name) if name in self.regions else -1

    def rondel_moves(self, here: int, ships: int) -> tuple[tuple[int, int, int], ...]:
        """(field, steps, ships it costs) for each field a stone on ``here`` (-1: off the
        rondel, placed free) may move to with ``ships`` on the board, in field order."""
        fields = len(self.fields)
        free = self.ruleset.rondel.free_steps
        ships = min(ships, fields)
        key = (here, ships)
        found = self._rondel.get(key)
        if found is None:
            if here < 0:
                moves = [(f, 0, 0) for f in range(fields)]
            else:
                moves = [
                    ((here + steps) % fields, steps, max(0, steps - free))
                    for steps in range(1, fields + 1)
                    if steps - free <= ships
                ]
            found = self._rondel[key] = tuple(sorted(moves))
        return found

    def sail_targets(self, explored: int, origin: int, reach: int) -> tuple[int, ...]:
        """The explored regions other than ``origin`` within ``reach`` borders of it, in map
        order: where a ship there may sail. Memoised (every Sailing action asks)."""
        key = (explored, origin, reach)
        found = self._targets.get(key)
        if found is None:
            dist = self.distances(explored, origin)
            found = self._targets[key] = tuple(
                d
                for d, far in enumerate(dist)
                if far <= reach and d != origin and explored >> d & 1
            )
        return found

    def distances(self, explored: int, origin: int) -> tuple[int, ...]:
        """:func:`distances` on this map, memoised: the map changes a dozen times a game."""
        key = (explored, origin)
        found = self._distances.get(key)
        if found is None:
            found = self._distances[key] = distances(self.adjacent, explored, origin)
        return found


def adjacency(
    regions: Sequence[str], borders: Iterable[Sequence[str]]
) -> tuple[tuple[int, ...], ...]:
    """Per region (by index in ``regions``): the regions across one border, ascending. The
    rules compile it from the ruleset; the greedy bot from the borders a view shows."""
    adjacent: list[set[int]] = [set() for _ in regions]
    for a, b in borders:
        adjacent[regions.index(a)].add(regions.index(b))
        adjacent[regions.index(b)].add(regions.index(a))
    return tuple(tuple(sorted(a)) for a in adjacent)


def distances(adjacent: Sequence[Sequence[int]], explored: int, origin: int) -> tuple[int, ...]:
    """Borders from ``origin`` to every region through explored regions only (a bit mask);
    an unexplored region gets a distance (it can be entered) but is never passed through.
    Unreachable: a large number."""
    far = 1 << 20
    dist = [far] * len(adjacent)
    dist[origin] = 0
    queue = deque([origin])
    while queue:
        r = queue.popleft()
        if not explored >> r & 1:
            continue
        for a in adjacent[r]:
            if dist[a] == far:
                dist[a] = dist[r] + 1
                queue.append(a)
    return tuple(dist)


def compile_rules(
    ruleset: Ruleset, options: dict[str, Any] | None = None, file: str | None = None
) -> Rules:
    """The engine's tables for ``ruleset``; Navegador has no edition options. ``file``: the
    ruleset file's text when it was given as a file (:attr:`Rules.file`)."""
    for key in options or {}:
        raise RulesetError(f"options.{key}: unknown option; Navegador has none")
    m = ruleset.map
    regions = tuple(r.id for r in m.regions)
    goods = tuple(g.id for g in ruleset.goods)
    start = ruleset.player
    starting = {"factory": 0, "shipyard": start.shipyards, "church": start.churches}
    rows = ruleset.market.rows
    return Rules(
        ruleset=ruleset,
        regions=regions,
        region_names=tuple(r.name for r in m.regions),
        home=regions.index(m.home),
        adjacent=adjacency(regions, m.borders),
        region_good=tuple(goods.index(r.good) if r.good else -1 for r in m.regions),
        stack_size=tuple(r.stack for r in m.regions),
        double_loss_up_to=tuple(r.double_loss_up_to for r in m.regions),
        starts_phase=tuple(r.starts_phase or 0 for r in m.regions),
        ends_game=tuple(r.ends_game for r in m.regions),
        goods=goods,
        tokens=tuple(tuple(sorted(g.tokens)) for g in ruleset.goods),
        removed=tuple(g.removed for g in ruleset.goods),
        fields=tuple(ruleset.rondel.fields),
        prices=tuple(tuple(row[g] for g in goods) for row in rows),
        factory_income=tuple(row["factory"] for row in rows),
        tracks=tuple(
            Track(
                id=b.id,
                column=COLUMNS.index(b.column),
                good=goods.index(b.good) if b.good else -1,
                workers=b.workers,
                prices=tuple(b.prices),
                pieces=b.pieces,
                starting=starting[b.column],
            )
            for b in ruleset.buildings
        ),
        base_vp=tuple(c.base_vp for c in ruleset.columns),
        coins=tuple(tuple(p.coin for p in c.positions) for c in ruleset.columns),
        position_vp=tuple(tuple(p.vp for p in c.positions) for c in ruleset.columns),
        king_vp=tuple(c.king_vp for c in ruleset.columns),
        ranges=tuple(m.sailing_range),
        file=file,
    )
