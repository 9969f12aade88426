"""Navegador's pending decisions and legal commands: who decides what now, and every
command a seat may send for it."""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache
from typing import Any, TypeVar

from ..commands import Command
from ..protocol import Decision
from .commands import (
    Build,
    BuyShips,
    Explore,
    Found,
    Pass,
    PayShip,
    Process,
    Recruit,
    Rondel,
    Sail,
    Sell,
    TakePrivilege,
    UseCard,
)
from .ruleset import COLUMNS
from .state import State

C = TypeVar("C", bound=Command)


def pending(s: State) -> tuple[Decision, ...]:
    if s.stage == "over":
        return ()
    return _decisions(s.current, s.stage)


@lru_cache(maxsize=1024)
def _decisions(seat: int, stage: str) -> tuple[Decision, ...]:
    """Decisions are immutable: each (seat, stage) is made once, not at every decision."""
    return (Decision(seat, stage),)


def legal_commands(s: State, seat: int) -> list[Command]:
    if s.stage == "over" or seat != s.current:
        return []
    legal = LEGAL.get(s.stage)
    return [] if legal is None else legal(s, seat)


def _legal_turn(s: State, seat: int) -> list[Command]:
    out: list[Command] = []
    if _card_usable(s, seat):
        out.append(_made(UseCard, seat))
    out += [_made(Rondel, seat, f) for f, _, _ in _rondel_moves(s, seat)]
    return out


@lru_cache(maxsize=8192)
def _made(kind: type[C], *args: Any) -> C:
    """Commands are immutable: each legal one is made once and reused (random play and the
    bots' playouts list them at every decision, and a frozen dataclass is slow to build)."""
    return kind(*args)


@lru_cache(maxsize=8192)
def _counted(kind: type[Sell | Process], seat: int, good: str, most: int) -> tuple[Command, ...]:
    """Selling or processing 1 to ``most`` units of ``good``, made once (see :func:`_made`)."""
    return tuple(kind(seat, good, count) for count in range(1, most + 1))


@lru_cache(maxsize=8192)
def _sails(
    seat: int, origin: int, destinations: tuple[int, ...], names: tuple[str, ...]
) -> tuple[Sail, ...]:
    """Sailing from ``origin`` to each of ``destinations``, made once (see :func:`_made`)."""
    return tuple(Sail(seat, names[origin], names[d]) for d in destinations)


def _card_usable(s: State, seat: int) -> bool:
    """The holder may sail first, once their stone is on the rondel (never in the first
    round)."""
    return s.stage == "turn" and seat == s.holder and s.stone[seat] >= 0


def _rondel_moves(s: State, seat: int) -> tuple[tuple[int, int, int], ...]:
    """(field, steps, ships it costs) for each field the stone may move to, in field order."""
    return s.rules.rondel_moves(s.stone[seat], s.on_board(seat))


def _legal_pay(s: State, seat: int) -> list[Command]:
    regions = s.rules.regions
    return [_made(PayShip, seat, regions[r]) for r, count in enumerate(s.ships[seat]) if count]


def _sail_range(s: State) -> int:
    return s.rules.ranges[s.phase - 1]


def _party(s: State, region: int) -> int:
    """Ships that must arrive together to explore ``region``: one more than it loses."""
    return _loss(s, region) + 1


def _loss(s: State, region: int) -> int:
    return 2 if s.n <= s.rules.double_loss_up_to[region] else 1


def _legal_sailing(s: State, seat: int) -> list[Command]:
    rules = s.rules
    names = rules.regions
    reach = _sail_range(s)
    ships, moved, explored = s.ships[seat], s.moved, s.explored
    out: list[Command] = []
    free = [(r, ships[r] - moved[r]) for r in range(len(names)) if ships[r] > moved[r]]
    for r, _ in free:
        out += _sails(seat, r, rules.sail_targets(explored, r, reach), names)
    if not s.explored_now:
        for x in range(len(names)):
            if explored >> x & 1:
                continue
            able = [(r, n) for r, n in free if rules.distances(explored, r)[x] <= reach]
            out += [
                _made(Explore, seat, names[x], tuple(names[r] for r in party))
                for party in _parties(able, _party(s, x))
            ]
    out.append(_made(Pass, seat))
    return out


def _parties(able: list[tuple[int, int]], size: int) -> list[tuple[int, ...]]:
    """Every multiset of ``size`` origins (in region order), each used at most its count."""
    if size == 0:
        return [()]
    out = []
    for i, (r, count) in enumerate(able):
        rest = [(r, count - 1), *able[i + 1 :]] if count > 1 else able[i + 1 :]
        out += [(r, *tail) for tail in _parties(rest, size - 1)]
    return out


def _hire(
    s: State, facilities: int, room: int, count: int, money: int
) -> tuple[int, int, int] | None:
    """Recruiting workers or building ships: (cost, gained, sold) for ``count``, or None
    if not allowed. The first ``facilities`` cost the facility price; further ones the
    phase's price and only while there is ``room``; facility ones past the room are paid
    first, then sold at once."""
    prices = s.rules.ruleset.prices
    cheap = min(count, facilities)
    dear = count - cheap
    if count < 1 or (dear and cheap + dear > room):
        return None
    cost = cheap * prices.facility + dear * prices.per_phase * s.phase
    if cost > money:
        return None
    gained = min(count, room)
    return cost, gained, count - gained


def _hire_counts(s: State, facilities: int, room: int, money: int) -> list[int]:
    """The counts :func:`_hire` allows: 1 up to the first refused one (a larger count costs
    more and needs more room, so none after it is allowed)."""
    counts = []
    for c in range(1, max(facilities, room) + 1):
        if _hire(s, facilities, room, c, money) is None:
            break
        counts.append(c)
    return counts


def _legal_workers(s: State, seat: int) -> list[Command]:
    room = s.rules.ruleset.player.max_workers - s.workers[seat]
    counts = _hire_counts(s, s.churches[seat], room, s.money[seat])
    return [*(_made(Recruit, seat, c) for c in counts), _made(Pass, seat)]


def _legal_ships(s: State, seat: int) -> list[Command]:
    counts = _hire_counts(s, s.shipyards[seat], s.in_supply(seat), s.money[seat])
    return [*(_made(BuyShips, seat, c) for c in counts), _made(Pass, seat)]


def _trade_limits(s: State, seat: int, g: int) -> tuple[int, int]:
    """Units of good ``g`` the seat may sell and process now (0, 0 once traded)."""
    if s.traded[g]:
        return 0, 0
    wild = 0 if s.wild_used else s.rules.ruleset.player.wildcard_factories
    return len(s.colonies[seat][g]), s.factories[seat][g] + wild


def _legal_market(s: State, seat: int) -> list[Command]:
    out: list[Command] = []
    for g, good in enumerate(s.rules.goods):
        sell, process = _trade_limits(s, seat, g)
        out += _counted(Sell, seat, good, sell)
        out += _counted(Process, seat, good, process)
    out.append(_made(Pass, seat))
    return out


def _colony_regions(s: State, seat: int) -> list[int]:
    """Regions where the seat may found a colony now."""
    if s.workers[seat] - s.used_workers < 2:
        return []
    money, ships, used = s.money[seat], s.ships[seat], s.used_ships
    return [
        r
        for r, stack in enumerate(s.stacks)
        if stack and s.explored >> r & 1 and ships[r] > used[r] and stack[0] <= money
    ]


def _legal_colony(s: State, seat: int) -> list[Command]:
    names = s.rules.regions
    return [*(_made(Found, seat, names[r]) for r in _colony_regions(s, seat)), _made(Pass, seat)]


def _buildable(s: State, seat: int) -> list[int]:
    spare = s.workers[seat] - s.used_workers
    money = s.money[seat]
    return [
        t
        for t, track in enumerate(s.rules.tracks)
        if s.left[t] and track.workers <= spare and s.price(t) <= money
    ]


def _legal_buildings(s: State, seat: int) -> list[Command]:
    tracks = s.rules.tracks
    return [*(_made(Build, seat, tracks[t].id) for t in _buildable(s, seat)), _made(Pass, seat)]


def _privilege_columns(s: State, seat: int) -> list[int]:
    if s.workers[seat] <= s.rules.ruleset.player.min_workers:
        return []
    held = s.privileges[seat]
    positions = s.rules.coins
    return [c for c in range(len(COLUMNS)) if s.gallery[c] and held[c] < len(positions[c])]


def _legal_privilege(s: State, seat: int) -> list[Command]:
    return [
        *(_made(TakePrivilege, seat, COLUMNS[c]) for c in _privilege_columns(s, seat)),
        _made(Pass, seat),
    ]


LEGAL: dict[str, Callable[[State, int], list[Command]]] = {
    "turn": _legal_turn,
    "pay": _legal_pay,
    "sailing": _legal_sailing,
    "workers": _legal_workers,
    "ships": _legal_ships,
    "market": _legal_market,
    "colony": _legal_colony,
    "privilege": _legal_privilege,
    "buildings": _legal_buildings,
}
