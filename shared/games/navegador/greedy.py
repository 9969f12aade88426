"""Navegador's greedy policy: a value for each legal command from a seat's view alone.

It looks one decision ahead with a few rules of thumb: explore whenever a party can reach
an unexplored region (explorers pay a bonus and VP), found the colonies it can afford,
sell or process at the market for the money each brings, buy buildings while workers and
money allow, take the privilege that pays most, and choose the rondel field whose action
is worth most now, less the ships it costs. Values are in rough "Cruzados/10" units. The
board's figures (borders, ranges, free steps, buildings, the player sheet) are read off the
view's ``board`` part: a game on a ruleset given as a file, whose name no loader knows, is
played like one on a shipped ruleset.
"""

from __future__ import annotations

import random
from typing import Any

from .ruleset import COLUMNS, adjacency, distances

Observation = dict[str, Any]
Command = dict[str, Any]

SHIP_COST = 6.0  # what a ship paid for the rondel is worth
PASS = 0.5


class _Seen:
    """What the policy reads off an observation, once per call."""

    def __init__(self, o: Observation) -> None:
        self.o = o
        board = o["board"]
        self.regions: list[str] = [region["id"] for region in o["regions"]]
        self.adjacent = adjacency(self.regions, board["borders"])
        self.free_steps: int = board["free_steps"]
        self.columns: list[dict[str, Any]] = board["columns"]
        self.seat: int = o["seat"]
        self.me: dict[str, Any] = o["players"][self.seat]
        self.mask = sum(1 << r for r, region in enumerate(o["regions"]) if region["explored"])
        self.reach: int = board["sailing_range"][o["phase"] - 1]
        self.ships: list[int] = self.me["ships"]
        self.unexplored = [r for r, region in enumerate(o["regions"]) if not region["explored"]]
        self._distances: dict[int, tuple[int, ...]] = {}

    def distances(self, origin: int) -> tuple[int, ...]:
        """Borders from ``origin`` through explored regions (memoised for this call)."""
        found = self._distances.get(origin)
        if found is None:
            found = self._distances[origin] = distances(self.adjacent, self.mask, origin)
        return found

    def frontier(self, r: int) -> int:
        """Borders from region ``r`` to the nearest unexplored region (explored paths)."""
        dist = self.distances(r)
        return min((dist[x] for x in self.unexplored), default=0)

    def can_explore(self) -> bool:
        for x in self.unexplored:
            party = 3 if self.o["regions"][x]["double_loss"] else 2
            near = sum(
                count
                for r, count in enumerate(self.ships)
                if count and self.distances(r)[x] <= self.reach
            )
            if near >= party:
                return True
        return False

    def colonies_open(self) -> int:
        money, workers = self.me["money"], self.me["workers"]
        count = 0
        for r, region in enumerate(self.o["regions"]):
            tokens = region["tokens"] or []
            for price in tokens[: self.ships[r]]:
                if price <= money:
                    money -= price
                    count += 1
        return min(count, int(workers) // 2)

    def market_income(self) -> int:
        total = 0
        wild = self.me["wildcard_factories"]
        for m in self.o["market"]:
            good = m["good"]
            sell = len(self.me["colonies"][good]) * m["price"]
            process = (self.me["factories"][good] + wild) * m["factory_income"]
            total += max(sell, process)
        return total

    def can_build(self) -> bool:
        return any(
            b["price"] is not None and b["price"] <= self.me["money"]
            for b in self.o["buildings"]
            if b["workers"] <= self.me["workers"]
        )

    def privilege_value(self, column: str) -> float:
        c = COLUMNS.index(column)
        sheet = self.columns[c]
        held: int = self.me["privileges"][column]
        if held >= len(sheet["coins"]) or self.me["workers"] <= 2:
            return 0.0
        count: int = self.achievements()[c]
        coin: int = sheet["coins"][held]
        vp: int = sheet["vp"][held]
        return coin * count / 10 + vp * count * 2

    def achievements(self) -> tuple[int, ...]:
        me = self.me
        return (
            sum(len(v) for v in me["colonies"].values()),
            sum(me["factories"].values()) + me["wildcard_factories"],
            me["explorers"],
            me["shipyards"],
            me["churches"],
        )

    def action_value(self, action: str) -> float:
        me = self.me
        if action == "sailing":
            return 16.0 if self.can_explore() else (4.0 if sum(self.ships) >= 2 else 1.0)
        if action == "colony":
            return 12.0 * self.colonies_open()
        if action == "market":
            return self.market_income() / 12
        if action == "buildings":
            return 11.0 if self.can_build() else 0.0
        if action == "privilege":
            return max((self.privilege_value(c) for c in COLUMNS), default=0.0)
        if action == "workers":
            return 6.0 if me["workers"] < 6 and me["money"] >= 100 else 0.5
        if action == "ships":
            return 8.0 if sum(self.ships) < 4 and me["money"] >= 100 else 0.5
        return 0.0


def _rondel(seen: _Seen, c: Command) -> float:
    here = seen.me["stone"]
    fields = len(seen.o["rondel"])
    steps = fields if here is None else (c["field"] - here) % fields or fields
    cost = 0 if here is None else max(0, steps - seen.free_steps)
    return seen.action_value(seen.o["rondel"][c["field"]]) - SHIP_COST * cost


def _use_card(seen: _Seen, c: Command) -> float:
    return 20.0 if seen.can_explore() else 0.1


def _pay_ship(seen: _Seen, c: Command) -> float:
    r = seen.regions.index(c["region"])
    return seen.ships[r] - (3 if seen.o["regions"][r]["tokens"] else 0)


def _sail(seen: _Seen, c: Command) -> float:
    origin = seen.regions.index(c["origin"])
    destination = seen.regions.index(c["destination"])
    gain = seen.frontier(origin) - seen.frontier(destination)
    tokens = seen.o["regions"][destination]["tokens"] or []
    colony = 2.0 if tokens and seen.ships[destination] < len(tokens) else 0.0
    return 1.0 + 2 * gain + colony


def _explore(seen: _Seen, c: Command) -> float:
    return 40.0 - 8 * len(c["origins"])


def _found(seen: _Seen, c: Command) -> float:
    r = seen.regions.index(c["region"])
    tokens = seen.o["regions"][r]["tokens"] or [0]
    return 20.0 - float(tokens[0]) / 20


def _build(seen: _Seen, c: Command) -> float:
    b = next(b for b in seen.o["buildings"] if b["id"] == c["building"])
    base_vp: int = seen.columns[COLUMNS.index(b["column"])]["base_vp"]
    worth = 4.0 * base_vp
    if b["good"] is not None:
        worth += len(seen.me["colonies"][b["good"]])
    return worth + 6 - float(b["price"]) / 25


def _sell(seen: _Seen, c: Command) -> float:
    m = next(m for m in seen.o["market"] if m["good"] == c["good"])
    return float(c["count"] * m["price"]) / 10


def _process(seen: _Seen, c: Command) -> float:
    m = next(m for m in seen.o["market"] if m["good"] == c["good"])
    count: int = c["count"]
    return float(count * m["factory_income"]) / 10 - (0.1 if count > 1 else 0.0)


def _hire(seen: _Seen, c: Command, facilities: int) -> float:
    count: int = c["count"]
    cheap = min(count, facilities)
    dear = count - cheap
    phase: int = seen.o["phase"]
    return 3.0 * cheap - dear * phase * 2.0 + 1


def _recruit(seen: _Seen, c: Command) -> float:
    return _hire(seen, c, seen.me["churches"])


def _buy_ships(seen: _Seen, c: Command) -> float:
    return _hire(seen, c, seen.me["shipyards"])


def _privilege(seen: _Seen, c: Command) -> float:
    return seen.privilege_value(c["column"]) + 1


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
    seen = _Seen(observation)
    return [_VALUE[c["type"]](seen, c) + rng.random() * 1e-3 for c in observation["legal_commands"]]
