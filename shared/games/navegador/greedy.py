"""Navegador's greedy policy: a value for each legal command from a seat's view alone.

It looks one decision ahead, but values each rondel field by what its action would bring
now, so that a table of greedy seats plays whole games (the ``mcts`` bot plays its
playouts with it). Rules of thumb, in rough "Cruzados/10" units, a VP worth :data:`VP`:

- Exploring (rules §4: at least two ships arriving together, three with the double loss)
  pays its explorer VP and bonus, and moves the game on towards Nagasaki; so each seat
  keeps a target, the unexplored region its ships reach with least sailing (the one nearer
  Nagasaki on a tie), sails its ships towards it, and values a Sailing that gathers a party
  within reach of it for the next one almost as much as exploring.
- Colonies, buildings, privileges, workers and ships are worth their VP and their use,
  less their price; money is worth less to a rich seat (it ends as 1 VP per 200 Cr), so a
  rich table buys the dear buildings too (their running out also ends the game, §8).
- The market brings its income: sell at a high price, process where factory income is high.

The board's figures (borders, ranges, free steps, the player sheet) are read off the view's
``board`` part: a game on a ruleset given as a file, whose name no loader knows, is played
like one on a shipped ruleset.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from types import SimpleNamespace
from typing import Any, NamedTuple

from . import views
from .ruleset import COLUMNS, Rules, adjacency, distances
from .state import State

Observation = dict[str, Any]
Command = Any
"""One of the game's commands (:mod:`.commands`), or its wire form read by field name: each
value function reads its own kind's fields."""

VP = 8.0  # a victory point: what mid-game money buys one for (80 Cr)
SHIP_COST = 10.0  # a ship paid for the rondel: its VP at the end and its use at sea
PASS = 0.5
FACILITY_PRICE = 50  # a worker per church, a ship per shipyard
PHASE_PRICE = 100  # any further one, times the phase
BONUS = 6.0  # an exploration's expected bonus (its stack's cheapest token, still face down)
DEPTH = 0.5  # an exploration's worth per border from home: progress towards Nagasaki
STAGE = 0.7  # a Sailing that gathers a party for the next one, against exploring now
RICH = 200  # money beyond which each Cruzado is worth less (see _Seen.money_weight)
SHIPS_WANTED = 4  # ships on the board below which another one is worth its use at sea
SHIP_NEED = 10.0  # the use of a ship while too few are on the board to explore
SHIP_USE = 3.0  # its use beyond that
WORKERS_WANTED = 7  # workers below which another one is worth its use (colonies, buildings)
WORKER_USE = 4.0
WORKERS_NEEDED = 5  # workers below which another one is needed most (a church needs five)
WORKER_NEED = 8.0
MAX_WORKERS = 9  # Lisboa's track (further church recruits are sold at once)
USE = {"shipyard": 4.0, "church": 4.0}  # a building's use beyond its VP (cheap ships, workers)
FACTORY_USES = 3.0  # processings a factory is expected to bring in a whole game
SALES = 2.5  # sales a colony is expected to bring in a whole game
LATE = 0.3  # what is left of those near the end
COLONY = COLUMNS.index("colony")
EXPLORER = COLUMNS.index("explorer")
COLUMN = {column: c for c, column in enumerate(COLUMNS)}  # a column's index by name
USE_OF = [USE.get(column, 0.0) for column in COLUMNS]  # USE by column index
FAR = 1 << 20  # the distance :func:`distances` gives an unreachable region
TARGETS_KEPT = 50_000  # targets a map remembers before it forgets them all


Target = tuple[int, tuple[int, ...]]
"""A seat's target region (-1: none) and the distances to it of the party's ships nearest
to it, nearest first (those the seat has: missing ones come from home)."""


class _Map:
    """A board's borders as the policy needs them: adjacency, each region's depth from home
    (borders on the whole map) and distances through explored regions, memoised (a board
    seldom changes; a view is made at every decision)."""

    def __init__(
        self, regions: tuple[str, ...], borders: tuple[tuple[str, ...], ...], home: int
    ) -> None:
        self.adjacent = adjacency(regions, borders)
        self._distances: dict[tuple[int, int], tuple[int, ...]] = {}
        # a seat's target by (explored mask, its ships, the parties), capped in size
        # (the target, -1: none, and its party's distances to it: see _Seen.target)
        self.targets: dict[tuple[int, tuple[int, ...], tuple[int, ...]], Target] = {}
        # the regions a seat's free ships can explore now, by (explored mask, its ships,
        # those sailed this action, the range, the parties), capped in size
        self.explorable: dict[tuple[Any, ...], tuple[int, ...]] = {}
        self.home = home
        self.depth = distances(self.adjacent, (1 << len(regions)) - 1, home)
        self._unexplored: dict[int, list[int]] = {}
        self._towards: dict[tuple[int, int], tuple[int, ...]] = {}

    def unexplored(self, mask: int) -> list[int]:
        """The regions not in ``mask``, memoised (read, never changed)."""
        found = self._unexplored.get(mask)
        if found is None:
            found = [r for r in range(len(self.depth)) if not mask >> r & 1]
            self._unexplored[mask] = found
        return found

    def towards(self, mask: int, x: int) -> tuple[int, ...]:
        """Per region, the borders from it to ``x`` through the regions of ``mask`` (capped
        at twice :data:`FAR`), memoised: a seat's ships sail towards their target."""
        key = (mask, x)
        found = self._towards.get(key)
        if found is None:
            found = tuple(min(self.distances(mask, r)[x], 2 * FAR) for r in range(len(self.depth)))
            self._towards[key] = found
        return found

    def distances(self, mask: int, origin: int) -> tuple[int, ...]:
        key = (mask, origin)
        found = self._distances.get(key)
        if found is None:
            found = self._distances[key] = distances(self.adjacent, mask, origin)
        return found


_MAPS: list[tuple[list[str], list[list[str]], int, _Map]] = []


def _map(regions: list[str], borders: list[list[str]], home: int) -> _Map:
    """The board's :class:`_Map`, made once per board: found by equality (a few C-level list
    comparisons), not by hashing the borders into a key at every decision."""
    for known_regions, known_borders, known_home, found in _MAPS:
        if known_borders == borders and known_regions == regions and known_home == home:
            return found
    made = _Map(tuple(regions), tuple(tuple(b) for b in borders), home)
    _MAPS[:] = [*_MAPS[-15:], (list(regions), [list(b) for b in borders], home, made)]
    return made


class _Table(NamedTuple):
    """What the policy reads off the rules for a table of some size, made once: the search
    reads the policy off whole states thousands of times a second."""

    regions: list[str]
    region_index: dict[str, int]  # a region's index by id
    goods: list[str | None]  # per region, None: home
    parties: tuple[int, ...]  # per region, a tuple: part of the targets' memo key
    map: _Map
    board: dict[str, Any]  # as the view shows it
    rondel: list[str]
    ships: int  # a seat's ships in all
    wildcard_factories: int
    tracks: list[tuple[str, int, str | None, int, tuple[int, ...], int]]  # see _tracks
    column_vps: list[list[float]]  # see _column_vps


_TABLES: list[tuple[Rules, int, _Table]] = []

Building = tuple[str, int, str | None, int, int]
"""A building on sale as the policy reads it: its track's id, column index, good (None: a
shipyard or a church), workers and price now."""


def _column_vps(columns: list[dict[str, Any]]) -> list[list[float]]:
    """Per column of the player sheet, the VP one more achievement brings with each number
    of its privileges held (base plus those privileges' VP): worked out once per board, not
    at every valuation."""
    return [
        [
            float(column["base_vp"] + sum(column["vp"][:held]))
            for held in range(len(column["vp"]) + 1)
        ]
        for column in columns
    ]


def _table(rules: Rules, players: int) -> _Table:
    """The :class:`_Table` of ``rules`` at ``players`` seats, found by identity (the rules
    are compiled once and shared)."""
    for known, n, found in _TABLES:
        if known is rules and n == players:
            return found
    goods_names = rules.goods
    goods = [goods_names[g] if g >= 0 else None for g in rules.region_good]
    board = views.board(rules)
    regions = list(rules.regions)
    home = next((r for r, good in enumerate(goods) if good is None), 0)
    made = _Table(
        regions,
        {region: r for r, region in enumerate(regions)},
        goods,
        tuple(3 if views.double_loss(rules, players, r) else 2 for r in range(len(regions))),
        _map(regions, board["borders"], home),
        board,
        list(rules.fields),
        rules.ruleset.player.ships,
        rules.ruleset.player.wildcard_factories,
        [
            (
                t.id,
                t.column,
                goods_names[t.good] if t.good >= 0 else None,
                t.workers,
                t.prices,
                t.on_board(players),
            )
            for t in rules.tracks
        ],
        _column_vps(board["columns"]),
    )
    _TABLES[:] = [*_TABLES[-15:], (rules, players, made)]
    return made


class _Seen:
    """What the policy reads for the seat it decides for, once per call (values memoised):
    the same fields whether read off the seat's view (:meth:`of_view`) or off a whole state
    (:meth:`of_state`, by the view's own builders, so it sees nothing the view hides)."""

    regions: list[str]
    region_goods: list[str | None]  # None: home
    _tokens: list[list[int] | None] | None  # see tokens
    _market: dict[str, tuple[int, int]] | None  # see market
    index: dict[str, int]  # a region's index by id
    gallery: Sequence[int]  # the privileges left per column (by index)
    parties: tuple[int, ...]  # per region, a tuple: part of the targets' memo key
    unexplored: list[int]
    mask: int
    map: _Map
    free_steps: int
    columns: list[dict[str, Any]]  # the player sheet, as the view's board shows it
    column_vps: list[list[float]]  # see _column_vps
    rondel: Sequence[str]
    seat: int
    _me: dict[str, Any] | None  # see me
    money: int
    workers: int
    ships: list[int]  # per region
    fleet: int  # the seat's ships in all, on the board and in its supply
    stone: int | None  # its rondel field, None before its first move
    shipyards: int
    churches: int
    explorers: int
    wildcards: int  # the seat's wildcard factories
    _holdings: list[tuple[int, int]] | None  # see holdings
    privileges: Sequence[int]  # the seat's privileges held per column (by index)
    phase: int
    reach: int
    stage: str
    _buildings: list[Building] | None
    _state: State | None  # the state read, for what is read late
    _table: _Table | None
    # memos, set on an instance when first worked out
    _achievements: tuple[int, ...] | None = None
    _worker: float | None = None  # what a worker paid for a privilege is worth
    _target: Target | None = None
    _towards: tuple[int, ...] | None = None  # per region, the borders to the target
    explored_now: bool  # this Sailing action has explored
    sailed: list[int]  # per region: ships that sailed there this action

    @classmethod
    def of_view(cls, o: Observation) -> _Seen:
        s = cls()
        board = o["board"]
        regions = o["regions"]
        s.regions = [region["id"] for region in regions]
        s.region_goods = [region["good"] for region in regions]
        s._tokens = [region["tokens"] for region in regions]
        s.parties = tuple(3 if region["double_loss"] else 2 for region in regions)
        s.mask = sum(1 << r for r, region in enumerate(regions) if region["explored"])
        home = next((r for r, good in enumerate(s.region_goods) if good is None), 0)
        s.map = _map(s.regions, board["borders"], home)
        s.free_steps, s.columns, s.rondel = board["free_steps"], board["columns"], o["rondel"]
        s.column_vps = _column_vps(s.columns)
        s.seat, s.phase, s.stage = o["seat"], o["phase"], o["stage"]
        me = s._me = o["players"][s.seat]
        s.money, s.workers, s.ships, s.stone = me["money"], me["workers"], me["ships"], me["stone"]
        s.shipyards, s.churches = me["shipyards"], me["churches"]
        s.explorers, s.wildcards = me["explorers"], me["wildcard_factories"]
        s.fleet = me["ships_in_supply"] + sum(s.ships)
        s.privileges = [me["privileges"][column] for column in COLUMNS]
        s.reach = board["sailing_range"][s.phase - 1]
        s._market = {m["good"]: (m["price"], m["factory_income"]) for m in o["market"]}
        s.index = {region: r for r, region in enumerate(s.regions)}
        s._holdings = [(len(me["colonies"][g]), me["factories"][g]) for g in s._market]
        s._buildings = [
            (b["id"], COLUMN[b["column"]], b["good"], b["workers"], b["price"])
            for b in o["buildings"]
            if b["price"] is not None
        ]
        s._state, s._table = None, None
        s.gallery = [o["gallery"][column] for column in COLUMNS]
        s.explored_now, s.sailed = o["action"]["explored"], o["action"]["sailed"]
        s._derive()
        return s

    @classmethod
    def of_state(cls, state: State, seat: int) -> _Seen:
        s = cls()
        table = _table(state.rules, state.n)
        s.regions, s.region_goods, s.parties = table.regions, table.goods, table.parties
        s.index = table.region_index
        s.map, s.mask = table.map, state.explored
        board = table.board
        s.free_steps, s.columns, s.rondel = board["free_steps"], board["columns"], table.rondel
        s.column_vps = table.column_vps
        s.seat, s.phase, s.stage = seat, state.phase, state.stage
        s.money, s.workers, s.ships = state.money[seat], state.workers[seat], state.ships[seat]
        stone = state.stone[seat]
        s.stone = stone if stone >= 0 else None
        s.shipyards, s.churches, s.fleet = state.shipyards[seat], state.churches[seat], table.ships
        s.explorers, s.wildcards = state.explorers[seat], table.wildcard_factories
        s.privileges = state.privileges[seat]
        s.reach = board["sailing_range"][s.phase - 1]
        # the colony stacks, the seat's whole part of its view, the market and the
        # buildings: read off the state when first asked for (most commands read none)
        s._tokens, s._me, s._buildings, s._market, s._holdings = None, None, None, None, None
        s._state, s._table = state, table
        s.gallery = state.gallery
        s.explored_now, s.sailed = state.explored_now, state.moved
        s._derive()
        return s

    def _derive(self) -> None:
        """The fields both sources share the reading of, and the memos."""
        self.unexplored = self.map.unexplored(self.mask)
        self.weight: float = 1.0 / (1.0 + max(0, self.money - RICH) / RICH)  # see money_weight
        self._actions: dict[str, float] = {}
        # the share of a whole game's uses still to come: the game ends at Nagasaki, so
        # the unexplored regions tell how far it has gone
        todo = len(self.unexplored) / max(1, len(self.regions) - 1)
        self.future = LATE + (1 - LATE) * todo

    @property
    def tokens(self) -> list[list[int] | None]:
        """Each region's colony stack, None while face down (read off the state when first
        asked for)."""
        if self._tokens is None:
            assert self._state is not None
            explored = self.mask
            self._tokens = [
                stack if explored >> r & 1 else None for r, stack in enumerate(self._state.stacks)
            ]
        return self._tokens

    def holdings(self) -> list[tuple[int, int]]:
        """Per good, in the market's order: the seat's colonies and its factories (read off
        the state when first asked for)."""
        if self._holdings is None:
            assert self._state is not None
            seat = self.seat
            self._holdings = [
                (len(colonies), factories)
                for colonies, factories in zip(
                    self._state.colonies[seat], self._state.factories[seat], strict=True
                )
            ]
        return self._holdings

    @property
    def me(self) -> dict[str, Any]:
        """The seat's part of its view (read off the state when first asked for)."""
        if self._me is None:
            assert self._state is not None and self._table is not None
            self._me = _player(self._state, self.seat, self._table)
        return self._me

    @property
    def market(self) -> dict[str, tuple[int, int]]:
        """Each good's price and factory income, in the view's order of goods (read off the
        state when first asked for, as :func:`views.market` reads them: most commands read
        none)."""
        if self._market is None:
            assert self._state is not None
            rules = self._state.rules
            prices, income = rules.prices, rules.factory_income
            self._market = {
                good: (prices[row][g], income[row])
                for g, (good, row) in enumerate(zip(rules.goods, self._state.market, strict=True))
            }
        return self._market

    def stack(self, r: int) -> list[int] | None:
        """Region ``r``'s colony stack, None while face down (:attr:`tokens`' item, read
        alone)."""
        if self._tokens is not None:
            return self._tokens[r]
        assert self._state is not None
        return self._state.stacks[r] if self.mask >> r & 1 else None

    @property
    def buildings(self) -> list[Building]:
        """The buildings on sale, in the view's order of tracks (read off the state when
        first asked for, as :func:`views.buildings` reads them)."""
        if self._buildings is None:
            assert self._state is not None and self._table is not None
            left = self._state.left
            self._buildings = [
                (track, c, good, workers, prices[on_board - left[i]])
                for i, (track, c, good, workers, prices, on_board) in enumerate(self._table.tracks)
                if left[i]
            ]
        return self._buildings

    # --- the map ------------------------------------------------------------------------

    def distances(self, origin: int) -> tuple[int, ...]:
        """Borders from ``origin`` through explored regions."""
        return self.map.distances(self.mask, origin)

    def party(self, x: int) -> int:
        """Ships that explore ``x`` together (one more than it loses)."""
        return self.parties[x]

    def target(self) -> int | None:
        """The unexplored region this seat's ships reach with least sailing (the party's
        ships nearest to it; missing ones come from home), the deeper one on a tie."""
        if self._target is None:
            memo = self.map.targets
            key = (self.mask, tuple(self.ships), self.parties)
            found = memo.get(key)
            if found is None:
                if len(memo) >= TARGETS_KEPT:
                    memo.clear()
                found = memo[key] = self._find_target()
            self._target = found
        x = self._target[0]
        return None if x < 0 else x

    def _find_target(self) -> Target:
        """:meth:`target` worked out (-1: none) with its party's distances, for the map's
        memo: the search asks for it at every playout step, mostly of the same ships on the
        same map."""
        best, least = -1, float("inf")
        party_of_best: tuple[int, ...] = ()
        rows = [self.distances(r) for r, count in enumerate(self.ships) for _ in range(count)]
        home = self.distances(self.map.home)
        for x in self.unexplored:
            party = self.parties[x]
            near = sorted([row[x] for row in rows])[:party]
            effort = sum(near) + home[x] * (party - len(near))
            k = effort - 0.3 * self.map.depth[x]
            if effort < FAR and k < least:
                best, least, party_of_best = x, k, tuple(near)
        return best, party_of_best

    def to_target(self, r: int) -> int:
        """Borders from region ``r`` to the target (0 without one)."""
        towards = self._towards
        if towards is None:
            x = self.target()
            towards = self._towards = (
                (0,) * len(self.regions) if x is None else self.map.towards(self.mask, x)
            )
        return towards[r]

    def spot(self, r: int, nth: int) -> float:
        """What the ``nth`` ship of this seat in region ``r`` is worth there for founding a
        colony: some while the region has a token for it, more if the seat can afford it."""
        tokens = self.stack(r) or []
        if nth > len(tokens) or self.workers < 2:
            return 0.0
        return 3.0 if tokens[0] <= self.money else 1.0

    # --- worth of things ----------------------------------------------------------------

    def money_weight(self) -> float:
        """What a Cruzado is worth to this seat, 1 until it is rich: a rich seat has nothing
        dearer to save for, and money ends as 1 VP per 200 Cr."""
        return self.weight

    def column_vp(self, c: int) -> float:
        """VP one more achievement in column ``c`` brings: base plus privileges held."""
        vps = self.column_vps[c]
        return vps[min(self.privileges[c], len(vps) - 1)]

    def explore_worth(self, x: int) -> float:
        """Exploring ``x``: the explorer's VP, the bonus, a colony stack opened where the
        party lands, progress towards Nagasaki (deeper regions first), less the ships lost."""
        lost = self.party(x) - 1
        depth = min(self.map.depth[x], 10)
        return VP * self.column_vp(EXPLORER) + BONUS + 2.0 + DEPTH * depth - lost * VP

    def explorable(self) -> float:
        """The best exploration the seat's unsailed ships can make now (0: none)."""
        sailing = self.stage == "sailing"
        if sailing and self.explored_now:
            return 0.0
        memo = self.map.explorable
        sailed = tuple(self.sailed) if sailing else None
        key = (self.mask, tuple(self.ships), sailed, self.reach, self.parties)
        found = memo.get(key)
        if found is None:
            if len(memo) >= TARGETS_KEPT:
                memo.clear()
            found = memo[key] = self._explorable(sailing)
        best = 0.0
        for x in found:
            best = max(best, self.explore_worth(x))
        return best

    def _explorable(self, sailing: bool) -> tuple[int, ...]:
        """The regions :meth:`explorable` weighs, for the map's memo."""
        sailed = self.sailed if sailing else [0] * len(self.ships)
        free = [
            (self.distances(r), count - sailed[r])
            for r, count in enumerate(self.ships)
            if count > sailed[r]
        ]
        return tuple(
            x
            for x in self.unexplored
            if sum(n for row, n in free if row[x] <= self.reach) >= self.parties[x]
        )

    def staging(self) -> float:
        """A Sailing that brings a party within reach of the target for the next one; else
        what it brings the party's ships nearer."""
        x = self.target()
        if x is None:
            return 0.0
        assert self._target is not None
        party = self._target[1]  # the ships' distances to x, nearest first: the party's
        if len(party) == self.party(x) and party[-1] <= 2 * self.reach:
            return STAGE * self.explore_worth(x)
        return 1.5 * sum(min(self.reach, max(0, d - 1)) for d in party if d < FAR)

    def colony_worth(self, r: int, price: int) -> float:
        good = self.region_goods[r]
        assert good is not None  # a colony's region
        sales = SALES * self.future * float(self.market[good][0])
        return VP * self.column_vp(COLONY) + (sales - price * self.money_weight()) / 10

    def building_worth(self, b: Building) -> float:
        _, c, good, _, price = b
        use = USE_OF[c] if good is None else FACTORY_USES * float(self.market[good][1]) / 10
        use *= self.future
        return VP * self.column_vp(c) + use - float(price) * self.weight / 10

    def privilege_worth(self, column: str) -> float:
        """Its coin now, its VP per achievement (a few more to come), less the worker."""
        c = COLUMN[column]
        sheet = self.columns[c]
        held = self.privileges[c]
        if held >= len(sheet["coins"]) or self.workers <= 2 or not self.gallery[c]:
            return 0.0
        count = self.achievements()[c]
        coin = float(sheet["coins"][held]) * count * self.money_weight() / 10
        vp = float(sheet["vp"][held])
        if self._worker is None:
            uses = self.worker_uses()
            self._worker = VP + (uses[0] if uses else 0.0)
        worker = self._worker
        return coin + VP * vp * (count + 0.5) - worker

    def achievements(self) -> tuple[int, ...]:
        if self._achievements is None:
            holdings = self.holdings()
            self._achievements = (
                sum(colonies for colonies, _ in holdings),
                sum(factories for _, factories in holdings) + self.wildcards,
                self.explorers,
                self.shipyards,
                self.churches,
            )
        return self._achievements

    def hire_worth(self, count: int, facilities: int, uses: list[float]) -> float:
        """Recruiting ``count`` workers or buying ``count`` ships: each a VP and its use
        (``uses``: of each further one; none past the list); the first ``facilities`` cost
        the facility price, the rest the price per phase times the phase (the standard
        prices: the view has no others)."""
        total = 0.0
        weight = self.money_weight()
        for k in range(count):
            price = FACILITY_PRICE if k < facilities else PHASE_PRICE * self.phase
            use = uses[k] if k < len(uses) else 0.0
            total += VP + use - price * weight / 10
        return total

    def best_hire(self, facilities: int, uses: list[float], room: int) -> float:
        """The best :meth:`hire_worth` the seat can pay for now (0: none worth it)."""
        best, cost = 0.0, 0
        for k in range(min(room, 4)):
            cost += FACILITY_PRICE if k < facilities else PHASE_PRICE * self.phase
            if cost > self.money:
                break
            best = max(best, self.hire_worth(k + 1, facilities, uses))
        return best

    def worker_uses(self) -> list[float]:
        """Workers serve colonies and buildings and pay privileges: most needed while
        fewer than the buildings ask (a church five), then of some use up to a few more."""
        short = max(0, WORKERS_NEEDED - self.workers)
        spare = max(0, WORKERS_WANTED - self.workers - short)
        return [WORKER_NEED] * short + [WORKER_USE] * spare

    def ship_uses(self) -> list[float]:
        """Ships are needed most while too few to explore the target; then a few more serve
        colonies and pay the rondel."""
        x = self.target()
        short = max(0, (2 if x is None else self.party(x)) - sum(self.ships))
        spare = max(0, SHIPS_WANTED - sum(self.ships) - short)
        return [SHIP_NEED] * short + [SHIP_USE] * spare

    # --- what an action brings ----------------------------------------------------------

    def action_value(self, action: str) -> float:
        found = self._actions.get(action)
        if found is None:
            found = self._actions[action] = _ACTIONS.get(action, _nothing)(self)
        return found


def _player(s: State, seat: int, table: _Table) -> dict[str, Any]:
    """The fields of the seat's part of its view (:func:`views.player`) that the policy
    reads, the same values read straight off the state: the lists are the state's own, not
    copies (the policy never changes them); a view's name is left out, and the privileges
    are read by column index (:attr:`_Seen.privileges`)."""
    goods = s.rules.goods
    stone, ships = s.stone[seat], s.ships[seat]
    return {
        "money": s.money[seat],
        "workers": s.workers[seat],
        "stone": stone if stone >= 0 else None,
        "ships": ships,
        "ships_in_supply": table.ships - sum(ships),
        "colonies": dict(zip(goods, s.colonies[seat], strict=True)),
        "factories": dict(zip(goods, s.factories[seat], strict=True)),
        "wildcard_factories": table.wildcard_factories,
        "shipyards": s.shipyards[seat],
        "churches": s.churches[seat],
        "explorers": s.explorers[seat],
    }


def _nothing(seen: _Seen) -> float:
    return 0.0


def _sailing_value(seen: _Seen) -> float:
    return max(seen.explorable(), seen.staging())


def _colony_value(seen: _Seen) -> float:
    """The colonies this seat could found now, cheapest first, while worth it."""
    money, workers, total = seen.money, seen.workers, 0.0
    for r, tokens in enumerate(seen.tokens):
        for price in (tokens or [])[: seen.ships[r]]:
            worth = seen.colony_worth(r, price)
            if price <= money and workers >= 2 and worth > 0:
                money -= price
                workers -= 2
                total += worth
    return total


def _buildings_value(seen: _Seen) -> float:
    """The buildings worth buying now, best first, while money and workers allow."""
    money, workers, total = seen.money, seen.workers, 0.0
    ranked = sorted(
        ((seen.building_worth(b), b) for b in seen.buildings), key=lambda pair: -pair[0]
    )
    for worth, (_, _, _, needed, price) in ranked:
        if worth <= 0:
            break
        if price <= money and needed <= workers:
            money -= price
            workers -= needed
            total += worth
    return total


def _market_value(seen: _Seen) -> float:
    """Per good the better of selling and processing; the orange factory on the best."""
    weight = seen.money_weight()
    total, wild = 0.0, 0.0
    for (price, income), (colonies, own) in zip(seen.market.values(), seen.holdings(), strict=True):
        sell = colonies * price
        process = own * income
        total += max(sell, process)
        wild = max(wild, (own + 1) * income - max(sell, process))
    wild = wild if seen.wildcards else 0.0
    return (total + wild) * weight / 10


def _privilege_value(seen: _Seen) -> float:
    return max(seen.privilege_worth(c) for c in COLUMNS)


def _workers_value(seen: _Seen) -> float:
    room = MAX_WORKERS - seen.workers
    return seen.best_hire(seen.churches, seen.worker_uses(), room)


def _ships_value(seen: _Seen) -> float:
    in_supply = seen.fleet - sum(seen.ships)
    if not in_supply:
        return 0.0
    return seen.best_hire(seen.shipyards, seen.ship_uses(), in_supply)


_ACTIONS = {
    "sailing": _sailing_value,
    "colony": _colony_value,
    "buildings": _buildings_value,
    "market": _market_value,
    "privilege": _privilege_value,
    "workers": _workers_value,
    "ships": _ships_value,
}


# --- values of commands ------------------------------------------------------------------


def _rondel(seen: _Seen, c: Command) -> float:
    here = seen.stone
    fields = len(seen.rondel)
    steps = fields if here is None else (c.field - here) % fields or fields
    cost = 0 if here is None else max(0, steps - seen.free_steps)
    return seen.action_value(seen.rondel[c.field]) - SHIP_COST * cost


def _use_card(seen: _Seen, c: Command) -> float:
    """The card's Sailing comes before the rondel move, not instead of it."""
    return 1000.0 if seen.action_value("sailing") > 2 else -1000.0


def _pay_ship(seen: _Seen, c: Command) -> float:
    """Pay with a ship far from the target and off a colony's region."""
    r = seen.index[c.region]
    near = 3.0 if seen.to_target(r) <= seen.reach else 0.0
    return 0.1 * seen.ships[r] - near - seen.spot(r, seen.ships[r])


def _sail(seen: _Seen, c: Command) -> float:
    origin = seen.index[c.origin]
    destination = seen.index[c.destination]
    gain = seen.to_target(origin) - seen.to_target(destination)
    arrive = seen.spot(destination, seen.ships[destination] + 1)
    return 2.0 * gain + arrive - seen.spot(origin, seen.ships[origin])


def _explore(seen: _Seen, c: Command) -> float:
    x = seen.index[c.region]
    origins = [seen.index[o] for o in c.origins]
    left = sum(seen.spot(r, seen.ships[r]) for r in set(origins))
    return 50.0 + seen.explore_worth(x) + (2.0 if x == seen.target() else 0.0) - 0.1 * left


def _found(seen: _Seen, c: Command) -> float:
    r = seen.index[c.region]
    tokens = seen.stack(r) or [0]
    return seen.colony_worth(r, tokens[0])


def _build(seen: _Seen, c: Command) -> float:
    b = next(b for b in seen.buildings if b[0] == c.building)
    return seen.building_worth(b)


def _sell(seen: _Seen, c: Command) -> float:
    price, _ = seen.market[c.good]
    return float(c.count * price) * seen.money_weight() / 10


def _process(seen: _Seen, c: Command) -> float:
    _, income = seen.market[c.good]
    count: int = c.count
    spare = 0.1 if count > seen.me["factories"][c.good] else 0.0  # the orange one kept
    return float(count * income) * seen.money_weight() / 10 - spare


def _recruit(seen: _Seen, c: Command) -> float:
    return seen.hire_worth(c.count, seen.churches, seen.worker_uses())


def _buy_ships(seen: _Seen, c: Command) -> float:
    return seen.hire_worth(c.count, seen.shipyards, seen.ship_uses())


def _privilege(seen: _Seen, c: Command) -> float:
    return seen.privilege_worth(c.column)


def _pass(seen: _Seen, c: Command) -> float:
    return PASS


_VALUE = {
    "rondel": _rondel,
    "use_card": _use_card,
    "pay_ship": _pay_ship,
    "sail": _sail,
    "explore": _explore,
    "found": _found,
    "build": _build,
    "sell": _sell,
    "process": _process,
    "recruit": _recruit,
    "buy_ships": _buy_ships,
    "privilege": _privilege,
    "pass": _pass,
}


def greedy_values(observation: Observation, rng: random.Random) -> list[float]:
    """The greedy bot's value of each legal command (a tiny random part breaks ties)."""
    # The wire forms, read by field name like the commands themselves (not parsed again:
    # the view's own legal commands need no checking).
    legal = [SimpleNamespace(**c) for c in observation["legal_commands"]]
    return _values(_Seen.of_view(observation), legal, rng)


def state_values(
    state: State, seat: int, legal: Sequence[Command], rng: random.Random
) -> list[float]:
    """:func:`greedy_values` read off a whole state instead of ``seat``'s view: the search
    plays its playouts with it without building a view at every step. It reads only what
    the seat's view shows, and gives the same values for the same ``rng``:
    ``state_values(s, seat, legal_commands(s, seat), r)`` equals
    ``greedy_values(view(s, seat), r)``."""
    return _values(_Seen.of_state(state, seat), legal, rng)


def _values(seen: _Seen, legal: Sequence[Command], rng: random.Random) -> list[float]:
    draw = rng.random
    return [_VALUE[c.type](seen, c) + draw() * 1e-3 for c in legal]
