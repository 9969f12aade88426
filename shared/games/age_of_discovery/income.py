"""Income from trade-good sets and ships (rules §6).

Any three goods pay $1, three identical $3, four identical $6; a ship is a wildcard, at most
one per set. The engine always takes the partition that pays most: a player would never
choose less.
"""

from __future__ import annotations

from functools import lru_cache


def set_income(
    goods: list[int] | tuple[int, ...], ships: int, values: tuple[int, int, int] = (1, 3, 6)
) -> int:
    """Best income for goods counts (one count per good type) and a number of ships."""
    return income_of(tuple(goods), ships, values)


@lru_cache(maxsize=4096)
def income_of(goods: tuple[int, ...], ships: int, values: tuple[int, int, int]) -> int:
    """:func:`set_income` of a tuple of counts, once per holding: the greedy policy asks
    what every good on offer would pay, at every decision of every playout."""
    counts = tuple(sorted((c for c in goods if c), reverse=True))
    return _best(counts, ships, 0, values)


@lru_cache(maxsize=65536)
def _best(counts: tuple[int, ...], ships: int, loose: int, values: tuple[int, int, int]) -> int:
    """Counts of the remaining good types, ships left, goods already set aside as loose."""
    any_three, three_same, four_same = values
    if not counts:
        # Loose goods form "any three" sets; each needs two goods at least (one ship per set).
        return any_three * min(loose // 2, (loose + ships) // 3)
    c, rest = counts[0], counts[1:]
    best = 0
    # Same-type sets for this good: pure fours, pure threes, three+ship fours, two+ship threes.
    for fours in range(c // 4 + 1):
        for threes in range((c - 4 * fours) // 3 + 1):
            left = c - 4 * fours - 3 * threes
            for ship_fours in range(min(ships, left // 3) + 1):
                left2 = left - 3 * ship_fours
                for ship_threes in range(min(ships - ship_fours, left2 // 2) + 1):
                    left3 = left2 - 2 * ship_threes
                    used = ship_fours + ship_threes
                    gain = four_same * (fours + ship_fours) + three_same * (threes + ship_threes)
                    total = gain + _best(rest, ships - used, loose + left3, values)
                    if total > best:
                        best = total
    return best
