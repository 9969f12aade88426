"""Scoring: colony majorities at each age end (rules §7) and the final breakdown.

``score`` is valid at any moment (live standings) and final once the game is over: colony
VP scored so far, discovery VP, building VP (fixed and conditional), economy VP (income from
sets alone: what turn 8's income phase paid, once paid; before, what the goods held would
pay), the total, the tie-break keys and the place.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .ruleset import Rules
from .state import GameState, income_from_sets

_AFTER_INCOME = frozenset({"upkeep", "over"})  # the phases that follow phase C in a turn


def colony_vp(units: Sequence[int], rules: Rules) -> list[int]:
    """VP per seat for one region at an age end (rules §7, every tie case)."""
    v = rules.ruleset.values
    vp = [0] * len(units)
    top = max(units)
    if top < v.colony_min_units:
        return vp
    firsts = [seat for seat, u in enumerate(units) if u == top]
    if len(firsts) == 2:
        for seat in firsts:
            vp[seat] = v.colony_tied_first_vp
    elif len(firsts) == 1:
        vp[firsts[0]] = v.colony_first_vp
        second = max((u for u in units if u < top), default=0)
        seconds = [seat for seat, u in enumerate(units) if u == second]
        if second > 0 and len(seconds) == 1:
            vp[seconds[0]] = v.colony_second_vp
    return vp


def _counts(s: GameState, seat: int) -> dict[str, int]:
    """What conditional building VP count (rules §8, Age III)."""
    return {
        "goods": sum(s.goods[seat]),
        "units": sum(region[seat] for region in s.units),
        "ships": s.ships[seat],
        "soldiers": sum(region[seat] for region in s.soldiers),
        "buildings": len(s.owned[seat]),
        "regions": sum(1 for region in s.units if region[seat]),
        "money": s.money[seat],
    }


def building_vp(s: GameState, seat: int) -> int:
    total = 0
    counts: dict[str, int] | None = None
    for b in s.owned[seat]:
        effects = s.rules.buildings[b].effects
        if fixed := effects.get("vp"):
            total += fixed["points"]
        if per := effects.get("vp_per"):
            counts = counts or _counts(s, seat)
            total += per["points"] * (counts[per["count"]] // per["per"])
    return total


def economy_vp(s: GameState, seat: int) -> int:
    """Income from sets of goods and ships only (buildings' money excluded), rules §6.

    Once the last turn's income is paid, the income its sets paid then: a good received
    later (West Indies Company, a region's good through Stable or Migration, in phase D)
    does not count. Before that, what the goods held now would pay (live standings)."""
    if s.phase in _AFTER_INCOME and s.turn >= s.rules.ruleset.turns:
        return s.income_sets[seat]
    return income_from_sets(s.rules, s.goods[seat], s.ships[seat])


def score(s: GameState) -> list[dict[str, Any]]:
    """The full breakdown per seat, with places decided by the rulebook's tie-breakers."""
    rules = s.rules
    rows = []
    for seat in range(s.n):
        colonies = sum(s.colony_vp[seat])
        discoveries = sum(rules.tokens[t][3] for t in s.tokens_won[seat]) + sum(
            rules.cards[c][3] for c in s.cards_won[seat]
        )
        buildings = building_vp(s, seat)
        economy = economy_vp(s, seat)
        tiebreak = [s.colony_vp[seat][-1], s.money[seat], sum(s.goods[seat])]
        rows.append(
            {
                "seat": seat,
                "colonies": colonies,
                "colonies_by_age": list(s.colony_vp[seat]),
                "discoveries": discoveries,
                "buildings": buildings,
                "economy": economy,
                "total": colonies + discoveries + buildings + economy,
                "tiebreak": tiebreak,
            }
        )
    keys = [(row["total"], *row["tiebreak"]) for row in rows]  # type: ignore[misc]
    for row, key in zip(rows, keys, strict=True):
        row["place"] = 1 + sum(1 for other in keys if other > key)
    return rows
