"""The game state: plain lists of integers, indexed by seat, region, good and unit type.

Kept deliberately flat so that copying is cheap: the bots' search copies and mutates private
states hundreds of thousands of times. Public functions never mutate a state they are given.
"""

from __future__ import annotations

from typing import Any

from ..state_fields import canonical_hash, copy_fields, restore_fields, snapshot_of
from .income import set_income
from .ruleset import Rules

# Fields copied by one level of list copy; nested lists of lists get a second level.
_FLAT = (
    "money",
    "order",
    "start_order",
    "initiative",
    "trade",
    "bbox",
    "specialists",
    "warfare",
    "region_good",
    "discovered",
    "token_on",
    "token_known",
    "unused_tokens",
    "ships",
    "goods_pile",
    "goods_revealed",
    "revealed_buildings",
    "university_used",
    "deck",
    "battles",
    "last_bid",
    "auction_order",
    "received",
    "returned",
    "income_sets",
    "dock",
    "shipping",
)
_NESTED = (
    "avail",
    "next_units",
    "disc",
    "units",
    "soldiers",
    "goods",
    "piles",
    "owned",
    "tokens_won",
    "cards_won",
    "colony_vp",
    "queue",
)
_SCALAR = (
    "n",
    "names",
    "turn",
    "phase",
    "cursor",
    "to_place",
    "dock_x",
    "dock_y",
    "ship_in_box",
    "ship_supply",
    "attacker",
    "defender",
    "bid_high",
    "bid_seat",
    "rng",
    "version",
)
_FIELDS = (*_SCALAR, *_FLAT, *_NESTED)
"""What a snapshot holds, in order."""


class GameState:
    """Everything about one game, public and hidden. See :mod:`.views` for what a seat sees."""

    __slots__ = ("choices", "rules", *_FLAT, *_NESTED, *_SCALAR)

    rules: Rules
    n: int
    names: tuple[str, ...]
    turn: int
    phase: str
    cursor: int
    queue: list[Any]
    to_place: int
    version: int
    rng: int
    money: list[int]
    order: list[int]
    start_order: list[int]  # the first turn's order, once drawn or bid for ([] before)
    avail: list[list[int]]
    next_units: list[list[int]]
    initiative: list[int]
    dock: list[tuple[int, int]]
    dock_x: int
    dock_y: int
    trade: list[int]
    shipping: list[tuple[int, int]]
    bbox: list[int]
    disc: list[list[int]]  # per seat: colonists (any 1-valued non-soldier), captains, soldiers
    specialists: list[int]  # seat per specialist space, -1 when free
    warfare: list[int]
    units: list[list[int]]  # region x seat, all units on the map
    soldiers: list[list[int]]  # region x seat, the soldiers among them
    region_good: list[bool]
    discovered: list[bool]
    token_on: list[int]  # token index per region (-1: none)
    token_known: list[bool]  # a failed expedition made this face-down token public
    unused_tokens: list[int]
    goods: list[list[int]]  # seat x good
    ships: list[int]
    ship_in_box: int
    ship_supply: int
    goods_pile: list[int]  # top is the end of the list
    goods_revealed: list[int]
    piles: list[list[int]]
    revealed_buildings: list[int]
    owned: list[list[int]]
    university_used: list[bool]
    tokens_won: list[list[int]]
    cards_won: list[list[int]]
    deck: list[int]
    colony_vp: list[list[int]]  # seat x age
    battles: list[int]
    attacker: int
    defender: int
    choices: dict[int, int]
    bid_high: int
    bid_seat: int
    last_bid: list[int]
    auction_order: list[int]
    received: list[int]
    returned: list[int]
    income_sets: list[int]  # per seat: income from sets paid this turn (economy VP at the end)

    def copy(self) -> GameState:
        new = GameState.__new__(GameState)
        copy_fields(self, new, _SCALAR, _FLAT)
        for name in _NESTED:
            setattr(new, name, [x[:] if isinstance(x, list) else x for x in getattr(self, name)])
        new.choices = dict(self.choices)
        return new

    def to_snapshot(self) -> dict[str, Any]:
        """Every field, hidden ones included: for snapshots and state hashes (server only)."""
        out = snapshot_of(self, _FIELDS, self.rules.options)
        out["choices"] = {str(k): v for k, v in sorted(self.choices.items())}
        return out

    @classmethod
    def from_snapshot(cls, rules: Rules, snapshot: dict[str, Any]) -> GameState:
        """Rebuild a state from :meth:`to_snapshot` output (after a JSON round trip too)."""
        s = cls.__new__(cls)
        s.rules = rules
        restore_fields(s, _FIELDS, snapshot)
        if "income_sets" not in snapshot:  # a snapshot from before it was kept
            s.income_sets = [
                income_from_sets(rules, goods, ships)
                for goods, ships in zip(s.goods, s.ships, strict=True)
            ]
        if "start_order" not in snapshot:  # a snapshot from before it was kept
            s.start_order = []
        s.names = tuple(s.names)
        s.dock = [tuple(x) for x in s.dock]  # type: ignore[misc]
        s.shipping = [tuple(x) for x in s.shipping]  # type: ignore[misc]
        s.queue = [tuple(x) if isinstance(x, list) else x for x in s.queue]
        s.choices = {int(k): v for k, v in snapshot["choices"].items()}
        return s

    def state_hash(self) -> str:
        return canonical_hash(self.to_snapshot())


def income_from_sets(rules: Rules, goods: list[int], ships: int) -> int:
    """What a seat's goods and ships pay as sets (rules §6), under the ruleset's values."""
    v = rules.ruleset.values
    return set_income(goods, ships, (v.set_any_three, v.set_three_same, v.set_four_same))


def blank_state(rules: Rules, players: int) -> GameState:
    """A state before its first event: the shape for ``players`` seats, nothing dealt."""
    n = players
    regions = len(rules.regions)
    s = GameState.__new__(GameState)
    s.rules = rules
    s.n = n
    s.names = tuple(f"seat {i}" for i in range(n))
    s.turn = 0
    s.phase = "setup"
    s.cursor = 0
    s.queue = []
    s.to_place = 0
    s.version = 0
    s.rng = 0
    s.money = [0] * n
    s.order = list(range(n))
    s.start_order = []
    s.avail = [[0] * 5 for _ in range(n)]
    s.next_units = [[0] * 5 for _ in range(n)]
    s.initiative = []
    s.dock = []
    s.dock_x = -1
    s.dock_y = -1
    s.trade = []
    s.shipping = []
    s.bbox = []
    s.disc = [[0, 0, 0] for _ in range(n)]
    s.specialists = [-1] * 5
    s.warfare = []
    s.units = [[0] * n for _ in range(regions)]
    s.soldiers = [[0] * n for _ in range(regions)]
    s.region_good = [True] * regions
    s.discovered = list(rules.start_discovered)
    s.token_on = [-1] * regions
    s.token_known = [False] * regions
    s.unused_tokens = []
    s.goods = [[0] * len(rules.goods) for _ in range(n)]
    s.ships = [0] * n
    s.ship_in_box = 0
    s.ship_supply = rules.ruleset.values.ships
    s.goods_pile = []
    s.goods_revealed = []
    s.piles = [[], [], []]
    s.revealed_buildings = []
    s.owned = [[] for _ in range(n)]
    s.university_used = [False] * n
    s.tokens_won = [[] for _ in range(n)]
    s.cards_won = [[] for _ in range(n)]
    s.deck = []
    s.colony_vp = [[0, 0, 0] for _ in range(n)]
    s.battles = []
    s.attacker = -1
    s.defender = -1
    s.choices = {}
    s.bid_high = 0
    s.bid_seat = -1
    s.last_bid = [0] * n
    s.auction_order = [-1] * n
    s.received = [0] * n
    s.returned = [0] * n
    s.income_sets = [0] * n
    return s
