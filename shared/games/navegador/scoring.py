"""Final scoring (rules §8): VP for workers, ships on the board and money, and the player
sheet's columns, the King's privilege placed where it scores most; the card's tie-break.

Valid at any moment: a live score is the score the game would have if it ended now.
"""

from __future__ import annotations

from typing import Any

from .ruleset import COLUMNS
from .state import State

BREAKDOWN = ("workers", "ships", "money", *(f"{c}_vp" for c in COLUMNS))


def king_column(s: State, seat: int, counts: tuple[int, ...] | None = None) -> int | None:
    """Where the King's privilege goes: the free position worth most (the first such
    column on a tie); None when every column is full. ``counts``: the seat's achievements,
    if known already."""
    rules = s.rules
    counts = s.achievements(seat) if counts is None else counts
    held = s.privileges[seat]
    best, gain = None, -1
    for c, count in enumerate(counts):
        if held[c] < len(rules.coins[c]) and rules.king_vp[c] * count > gain:
            best, gain = c, rules.king_vp[c] * count
    return best


def column_values(s: State, seat: int, king: int | None = None) -> list[int]:
    """VP per achievement in each column: base, privileges taken, the King's (placed as
    :func:`king_column` says unless given)."""
    rules = s.rules
    king = king_column(s, seat) if king is None else king
    held = s.privileges[seat]
    out = []
    for c, base in enumerate(rules.base_vp):
        value = base + sum(rules.position_vp[c][: held[c]])
        out.append(value + (rules.king_vp[c] if c == king else 0))
    return out


def card_order(s: State, seat: int) -> int:
    """How soon ``seat`` would hold the card: 0 its holder, then to the holder's right."""
    return (s.holder - seat) % s.n


def score(s: State) -> list[dict[str, Any]]:
    """Each seat's breakdown, total, tie-break and place (the card breaks ties)."""
    rows = []
    per_vp = s.rules.ruleset.prices.money_per_vp
    for seat in range(s.n):
        counts = s.achievements(seat)
        king = king_column(s, seat, counts)
        values = column_values(s, seat, king)
        parts = [s.workers[seat], s.on_board(seat), s.money[seat] // per_vp]
        parts += [v * k for v, k in zip(values, counts, strict=True)]
        row: dict[str, Any] = {"seat": seat, **dict(zip(BREAKDOWN, parts, strict=True))}
        row["total"] = sum(parts)
        row["king"] = None if king is None else COLUMNS[king]
        row["tiebreak"] = [s.n - card_order(s, seat)]
        rows.append(row)
    keys = [(row["total"], *row["tiebreak"]) for row in rows]
    for row, key in zip(rows, keys, strict=True):
        row["place"] = 1 + sum(1 for other in keys if other > key)
    return rows


def final_results(s: State) -> list[dict[str, int]]:
    """What ``game_ended`` records: each seat's total and place."""
    return [{"seat": r["seat"], "total": r["total"], "place": r["place"]} for r in score(s)]
