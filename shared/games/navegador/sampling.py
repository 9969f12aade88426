"""Whole states drawn from one seat's observation: the bots' determinizations.

A bot sees its view, not the state. :class:`Sampler` rebuilds every public field from the
view, and draws the hidden ones (the face-down stacks of unexplored regions and the removed
tokens) from the tokens nobody has seen: every token of the ruleset less those face up on
explored regions and those founded as colonies. The pools are sorted before they are
shuffled, so a sample depends on the view and the seed alone.
"""

from __future__ import annotations

from typing import Any

from .legal import pending
from .ruleset import COLUMNS, Rules
from .state import State, blank_state
from .views import deal_hidden, hidden_regions

Observation = dict[str, Any]


class Sampler:
    """Reads an observation once, then draws as many states from it as a search needs."""

    def __init__(self, rules: Rules, observation: Observation) -> None:
        self.base = s = _public_state(rules, observation)
        self.regions = hidden_regions(s)
        seen: list[list[int]] = [[] for _ in rules.goods]
        for region in observation["regions"]:
            if region["tokens"] is not None and region["good"] is not None:
                seen[rules.goods.index(region["good"])] += region["tokens"]
        for player in observation["players"]:
            for good, prices in player["colonies"].items():
                seen[rules.goods.index(good)] += prices
        self.pools = []
        for g, tokens in enumerate(rules.tokens):
            pool = list(tokens)
            for price in seen[g]:
                pool.remove(price)
            self.pools.append(pool)
        waiting = [(d["seat"], d["kind"]) for d in observation["pending"]]
        assert [(d.seat, d.kind) for d in pending(s)] == waiting, "the view's decisions differ"

    def sample(self, seed: int) -> State:
        """A copy of the public state with the hidden stacks drawn from ``seed``."""
        s = self.base.copy()
        deal_hidden(s, [list(p) for p in self.pools], self.regions, seed)
        return s


def _public_state(rules: Rules, o: Observation) -> State:
    """Every public field of the state, read off the view; hidden stacks only sized."""
    n = len(o["players"])
    s = blank_state(rules, n)
    goods = rules.goods
    s.phase, s.next_phase = o["phase"], o["next_phase"] or 0
    s.stage, s.current, s.start, s.turn = o["stage"], o["current"], o["start_player"], o["turn"]
    s.owed = o["owed_ships"]
    card = o["card"]
    s.holder = card["holder"]
    s.marker = -1 if card["marker"] is None else card["marker"]
    a = o["action"]
    s.card_sail, s.explored_now = a["card_sail"], a["explored"]
    s.moved, s.used_ships = list(a["sailed"]), list(a["colony_ships"])
    s.used_workers, s.wild_used = a["workers_used"], a["wildcard_used"]
    s.traded = [g in a["traded"] for g in goods]
    s.triggered = o["end"]["triggered"]
    left = o["end"]["final_turns_left"]
    s.final_left = -1 if left is None else left
    for seat, p in enumerate(o["players"]):
        s.names[seat] = p["name"]
        s.money[seat], s.workers[seat] = p["money"], p["workers"]
        s.stone[seat] = -1 if p["stone"] is None else p["stone"]
        s.ships[seat] = list(p["ships"])
        s.colonies[seat] = [list(p["colonies"][g]) for g in goods]
        s.factories[seat] = [p["factories"][g] for g in goods]
        s.shipyards[seat], s.churches[seat] = p["shipyards"], p["churches"]
        s.explorers[seat] = p["explorers"]
        s.privileges[seat] = [p["privileges"][c] for c in COLUMNS]
    s.explored = 0
    for r, region in enumerate(o["regions"]):
        if region["explored"]:
            s.explored |= 1 << r
            s.stacks[r] = list(region["tokens"])
        else:
            s.stacks[r] = [0] * region["face_down"]  # sized here, drawn by every sample
        s.explored_by[r] = -1 if region["explorer"] is None else region["explorer"]
    s.removed = [[0] * o["removed_tokens"][g] for g in goods]
    s.market = [m["row"] - 1 for m in o["market"]]
    s.left = [b["left"] for b in o["buildings"]]
    s.gallery = [o["gallery"][c] for c in COLUMNS]
    s.supply = [o["privilege_supply"][c] for c in COLUMNS]
    return s
