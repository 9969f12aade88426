"""Who must decide what now: the pending decisions and the commands that answer each."""

from __future__ import annotations

from functools import lru_cache

from ..commands import Command
from ..protocol import Decision
from .commands import (
    Battle,
    Bid,
    BuyBuilding,
    Casualties,
    Expedition,
    Land,
    Migrate,
    MoveSoldier,
    Pass,
    Place,
    TakeGood,
    TakeSpecialist,
    UseUniversity,
    War,
)
from .emit import _has
from .state import GameState

# What each decision kind is called in ``pending`` and which commands answer it.
KIND = {
    "auction": "bid",
    "auction_bonus": "specialist",
    "placement": "place",
    "dock": "land",
    "goods": "take_good",
    "buildings": "buy",
    "discovery": "expedition",
    "training": "specialist",
    "warfare": "conflict",
    "upkeep": "move",
}
ANSWERS: dict[str, tuple[type[Command], ...]] = {
    "bid": (Bid, Pass),
    "place": (Place, UseUniversity),
    "land": (Land,),
    "take_good": (TakeGood,),
    "buy": (BuyBuilding, Pass),
    "expedition": (Expedition, Pass),
    "specialist": (TakeSpecialist, Pass),
    "conflict": (Battle, War, Pass),
    "casualties": (Casualties,),
    "move": (MoveSoldier, Migrate, Pass),
}


def pending(state: GameState) -> tuple[Decision, ...]:
    """Who must decide what now: usually one seat; both sides choosing casualties at once."""
    phase = state.phase
    if phase == "placement":
        return _decisions(state.queue[state.cursor], "place") if state.to_place else ()
    if phase == "warfare" and state.battles:
        return tuple(_decisions(seat, "casualties")[0] for seat in _battle_choosers(state))
    kind = KIND.get(phase)
    if kind is None:
        return ()
    if phase == "auction":
        return _decisions(state.queue[state.cursor], kind) if len(state.queue) > 1 else ()
    if state.cursor >= len(state.queue):
        return ()
    entry = state.queue[state.cursor]
    return _decisions(entry[0] if isinstance(entry, tuple) else entry, kind)


@lru_cache(maxsize=256)
def _decisions(seat: int, kind: str) -> tuple[Decision, ...]:
    """A seat's one decision, made once per (seat, kind): decisions are immutable, and
    ``pending`` is asked several times per command."""
    return (Decision(seat, kind),)


def _battle_choosers(s: GameState) -> list[int]:
    """Seats with a real casualty choice in the current battle that have not chosen yet."""
    out = []
    for seat, (lo, hi) in _casualty_ranges(s).items():
        if hi > lo and seat not in s.choices:
            out.append(seat)
    return out


def _casualty_ranges(s: GameState) -> dict[int, tuple[int, int]]:
    """For each side: the range of how many enemy soldiers its kills may take."""
    region, a, d = s.battles[0], s.attacker, s.defender
    units, soldiers = s.units[region], s.soldiers[region]
    kills = {a: min(soldiers[a], units[d]), d: min(soldiers[d] + _militia(s, d), units[a])}
    out = {}
    for seat, enemy in ((a, d), (d, a)):
        k, enemy_soldiers = kills[seat], soldiers[enemy]
        enemy_colonists = units[enemy] - enemy_soldiers
        out[seat] = (max(0, k - enemy_colonists), min(k, enemy_soldiers))
    return out


def _militia(s: GameState, seat: int) -> int:
    militia = _has(s, seat, "militia")
    return militia["soldiers"] if militia else 0
