"""Navegador's game state: plain integers and lists indexed by seat, region, good, column.

Flat so that copying is cheap (the bots' search copies states by the hundred thousand).
Public functions never mutate a state they are given. The hidden parts are ``stacks`` of
unexplored regions and ``removed``; everything else is public (see :mod:`.views`).
"""

from __future__ import annotations

from typing import Any

from ..state_fields import canonical_hash, copy_fields, restore_fields, snapshot_of
from .ruleset import COLUMNS, Rules

_SCALAR = (
    "n",
    "phase",
    "next_phase",
    "stage",
    "current",
    "start",
    "turn",
    "owed",
    "holder",
    "marker",
    "card_sail",
    "explored",
    "explored_now",
    "used_workers",
    "wild_used",
    "triggered",
    "final_left",
)
_FLAT = (
    "names",
    "money",
    "workers",
    "stone",
    "explored_by",
    "market",
    "gallery",
    "supply",
    "left",
    "shipyards",
    "churches",
    "explorers",
    "moved",
    "used_ships",
    "traded",
)
_NESTED = ("ships", "stacks", "removed", "colonies", "factories", "privileges")
_FIELDS = (*_SCALAR, *_FLAT, *_NESTED)
"""What a snapshot holds, in order."""


class State:
    """Everything about one game, public and hidden."""

    __slots__ = ("rules", *_FIELDS)

    rules: Rules
    n: int
    phase: int  # 1..3
    next_phase: int  # a phase triggered, starting with the next turn (0: none)
    stage: str  # the decision pending: "turn" (move the stone, or first use the card),
    # "pay" (ships owed for the move), an action's name, or "over"; between two events of
    # one decision also "card_done", "turn_done" or "between"
    current: int  # whose turn it is
    start: int  # the starting player
    turn: int  # turns started so far
    owed: int  # ships still to pay for the rondel move
    holder: int  # the Navegador card's holder
    marker: int  # the orange ship's rondel field (-1: not placed yet)
    card_sail: bool  # the sailing under way is the card's
    explored: int  # bit mask of explored regions
    explored_now: bool  # this Sailing action has explored
    used_workers: int  # workers serving colonies or buildings this action
    wild_used: bool  # the orange factory processed this Market action
    triggered: bool  # the end is triggered
    final_left: int  # final turns still to play (-1: not counting yet)
    names: list[str]
    money: list[int]
    workers: list[int]
    stone: list[int]  # rondel field per seat (-1: off the rondel)
    explored_by: list[int]  # per region: the seat that explored it (-1: none)
    market: list[int]  # per good: its marker's row, 0 the top
    gallery: list[int]  # per column: privileges in the gallery
    supply: list[int]  # per column: privileges beside the board
    left: list[int]  # per building track: buildings still on it
    shipyards: list[int]
    churches: list[int]
    explorers: list[int]
    moved: list[int]  # per region: the current seat's ships that sailed there this action
    used_ships: list[int]  # per region: ships serving a colony this action
    traded: list[bool]  # per good: sold or processed this Market action
    ships: list[list[int]]  # seat x region
    stacks: list[list[int]]  # region: colony token prices, ascending (hidden if unexplored)
    removed: list[list[int]]  # good: tokens out of the game (hidden)
    colonies: list[list[list[int]]]  # seat x good: prices of the colonies founded
    factories: list[list[int]]  # seat x good
    privileges: list[list[int]]  # seat x column

    def copy(self) -> State:
        new = State.__new__(State)
        copy_fields(self, new, _SCALAR, _FLAT)
        new.ships = [row[:] for row in self.ships]
        new.stacks = [row[:] for row in self.stacks]
        new.removed = [row[:] for row in self.removed]
        new.colonies = [[g[:] for g in seat] for seat in self.colonies]
        new.factories = [row[:] for row in self.factories]
        new.privileges = [row[:] for row in self.privileges]
        return new

    def to_snapshot(self) -> dict[str, Any]:
        """Every field, hidden ones included (server only)."""
        return snapshot_of(self, _FIELDS, {})

    @classmethod
    def from_snapshot(cls, rules: Rules, snapshot: dict[str, Any]) -> State:
        s = cls.__new__(cls)
        s.rules = rules
        restore_fields(s, _FIELDS, snapshot)
        return s

    def state_hash(self) -> str:
        return canonical_hash(self.to_snapshot())

    # Small derived facts the engine, the views and the scoring share.

    def is_explored(self, region: int) -> bool:
        return bool(self.explored >> region & 1)

    def on_board(self, seat: int) -> int:
        return sum(self.ships[seat])

    def in_supply(self, seat: int) -> int:
        return self.rules.ruleset.player.ships - sum(self.ships[seat])

    def achievements(self, seat: int) -> tuple[int, ...]:
        """Per column: colonies, factories (the orange one included), explorers, shipyards,
        churches."""
        return (
            sum(len(c) for c in self.colonies[seat]),
            sum(self.factories[seat]) + self.rules.ruleset.player.wildcard_factories,
            self.explorers[seat],
            self.shipyards[seat],
            self.churches[seat],
        )

    def price(self, track: int) -> int:
        """The price of the cheapest building left on a track (tracks are bought from the
        cheapest field); only meaningful while one is left."""
        t = self.rules.tracks[track]
        return t.prices[t.on_board(self.n) - self.left[track]]


def blank_state(rules: Rules, players: int) -> State:
    """A state before its first event: the shape for ``players`` seats, nothing dealt."""
    n = players
    regions = len(rules.regions)
    goods = len(rules.goods)
    start = rules.ruleset.player
    s = State.__new__(State)
    s.rules = rules
    s.n = n
    s.phase = 1
    s.next_phase = 0
    s.stage = "turn"
    s.current = 0
    s.start = 0
    s.turn = 0
    s.owed = 0
    s.holder = 0
    s.marker = -1
    s.card_sail = False
    s.explored = 1 << rules.home
    s.explored_now = False
    s.used_workers = 0
    s.wild_used = False
    s.triggered = False
    s.final_left = -1
    s.names = [f"seat {i}" for i in range(n)]
    s.money = [start.money] * n
    s.workers = [start.workers] * n
    s.stone = [-1] * n
    s.explored_by = [-1] * regions
    s.market = [rules.ruleset.market.start_row - 1] * goods
    s.gallery = [rules.ruleset.gallery.start] * len(COLUMNS)
    s.supply = [rules.ruleset.gallery.supply] * len(COLUMNS)
    s.left = [t.on_board(n) for t in rules.tracks]
    s.shipyards = [start.shipyards] * n
    s.churches = [start.churches] * n
    s.explorers = [0] * n
    s.moved = [0] * regions
    s.used_ships = [0] * regions
    s.traded = [False] * goods
    s.ships = [[0] * regions for _ in range(n)]
    for seat in range(n):
        s.ships[seat][rules.home] = start.ships_at_home
    s.stacks = [[] for _ in range(regions)]
    s.removed = [[] for _ in range(goods)]
    s.colonies = [[[] for _ in range(goods)] for _ in range(n)]
    s.factories = [[0] * goods for _ in range(n)]
    s.privileges = [[0] * len(COLUMNS) for _ in range(n)]
    return s
