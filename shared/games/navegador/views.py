"""What a seat (or a spectator) may see, and hidden-information resampling (rules §9).

Public: everything but the face-down colony stacks of unexplored regions and the tokens
removed at setup (of those, only their number shows). ``view`` is built field by field
from public parts only, so nothing hidden can leak by accident; ``determinize`` resamples
exactly the hidden parts. Every public field of the state is in the view, so that a bot's
sampler (:mod:`.sampling`) can rebuild a whole state from it.
"""

from __future__ import annotations

import random
from typing import Any

from ..protocol import merge_views, own_view
from ..ruleset_files import CARRIED
from .engine import NAME
from .legal import _card_usable, legal_commands, pending
from .ruleset import COLUMNS, Rules
from .scoring import score
from .state import State


def player(s: State, seat: int) -> dict[str, Any]:
    """One seat's part of the view (all public; the greedy policy reads its own off a state
    by this too)."""
    goods = s.rules.goods
    return {
        "seat": seat,
        "name": s.names[seat],
        "money": s.money[seat],
        "workers": s.workers[seat],
        "stone": s.stone[seat] if s.stone[seat] >= 0 else None,
        "ships": list(s.ships[seat]),
        "ships_in_supply": s.in_supply(seat),
        "colonies": {g: list(s.colonies[seat][i]) for i, g in enumerate(goods)},
        "factories": {g: s.factories[seat][i] for i, g in enumerate(goods)},
        "wildcard_factories": s.rules.ruleset.player.wildcard_factories,
        "shipyards": s.shipyards[seat],
        "churches": s.churches[seat],
        "explorers": s.explorers[seat],
        "privileges": dict(zip(COLUMNS, s.privileges[seat], strict=True)),
    }


def double_loss(rules: Rules, players: int, r: int) -> bool:
    """Whether region ``r`` carries the double-loss token at a table of ``players``."""
    return players <= rules.double_loss_up_to[r]


def _region(s: State, r: int) -> dict[str, Any]:
    rules = s.rules
    explored = s.explored >> r & 1 == 1
    good = rules.region_good[r]
    return {
        "id": rules.regions[r],
        "name": rules.region_names[r],
        "good": rules.goods[good] if good >= 0 else None,
        "explored": explored,
        "explorer": s.explored_by[r] if s.explored_by[r] >= 0 else None,
        "double_loss": double_loss(rules, s.n, r),
        "tokens": list(s.stacks[r]) if explored else None,
        "face_down": 0 if explored else len(s.stacks[r]),
    }


def _action(s: State) -> dict[str, Any]:
    """The progress of the action under way (what each further step may still use)."""
    return {
        "card_sail": s.card_sail,
        "sailed": list(s.moved),
        "explored": s.explored_now,
        "colony_ships": list(s.used_ships),
        "workers_used": s.used_workers,
        "traded": [g for g, done in zip(s.rules.goods, s.traded, strict=True) if done],
        "wildcard_used": s.wild_used,
    }


def market(s: State) -> list[dict[str, Any]]:
    """Each good's row, price and factory income."""
    rules = s.rules
    return [
        {
            "good": good,
            "row": s.market[g] + 1,
            "price": rules.prices[s.market[g]][g],
            "factory_income": rules.factory_income[s.market[g]],
        }
        for g, good in enumerate(rules.goods)
    ]


def buildings(s: State) -> list[dict[str, Any]]:
    """Each building track: what it adds to, its workers, what is left and its price now."""
    goods = s.rules.goods
    return [
        {
            "id": t.id,
            "column": COLUMNS[t.column],
            "good": goods[t.good] if t.good >= 0 else None,
            "workers": t.workers,
            "left": s.left[i],
            "price": s.price(i) if s.left[i] else None,
        }
        for i, t in enumerate(s.rules.tracks)
    ]


def board(rules: Rules) -> dict[str, Any]:
    """The ruleset's fixed figures a client or a bot needs beyond the state: the map's
    borders, the sailing range per phase, the rondel's free steps and the player sheet's
    columns. From the ruleset, so a house map is drawn and played like the standard one."""
    return {
        "borders": [list(pair) for pair in rules.ruleset.map.borders],
        "sailing_range": list(rules.ranges),
        "free_steps": rules.ruleset.rondel.free_steps,
        "columns": [
            {
                "id": column,
                "base_vp": rules.base_vp[c],
                "coins": list(rules.coins[c]),
                "vp": list(rules.position_vp[c]),
                "king_vp": rules.king_vp[c],
            }
            for c, column in enumerate(COLUMNS)
        ],
    }


def view(s: State, seat: int | None = None) -> dict[str, Any]:
    """Everything ``seat`` may see (``None``: a spectator). JSON-ready; never a hidden value:
    the public view, with the seat's private part set over it."""
    public = public_view(s)
    return public if seat is None else merge_views(public, private_view(s, seat))


def public_view(s: State) -> dict[str, Any]:
    """What every seat and the spectators see (everything in Navegador but a seat's legal
    commands: no hand, no secret goal): the spectator's view."""
    rules = s.rules
    out: dict[str, Any] = {
        "game": NAME,
        "ruleset": rules.ruleset.name,
        "options": {},
        "seat": None,
        "turn": s.turn,
        "phase": s.phase,
        "next_phase": s.next_phase or None,
        "stage": s.stage,
        "current": s.current,
        "start_player": s.start,
        "owed_ships": s.owed,
        "rondel": list(rules.fields),
        "board": board(rules),
        **({} if rules.file is None else {CARRIED: rules.file}),
        "card": {
            "holder": s.holder,
            "marker": s.marker if s.marker >= 0 else None,
            "usable": _card_usable(s, s.holder),
        },
        "action": _action(s),
        "players": [player(s, p) for p in range(s.n)],
        "regions": [_region(s, r) for r in range(len(rules.regions))],
        "removed_tokens": {g: len(s.removed[i]) for i, g in enumerate(rules.goods)},
        "market": market(s),
        "buildings": buildings(s),
        "gallery": dict(zip(COLUMNS, s.gallery, strict=True)),
        "privilege_supply": dict(zip(COLUMNS, s.supply, strict=True)),
        "end": {
            "triggered": s.triggered,
            "final_turns_left": s.final_left if s.final_left >= 0 else None,
        },
        "pending": [{"seat": d.seat, "kind": d.kind} for d in pending(s)],
        "scores": score(s),
    }
    return out


def policy_view(s: State, seat: int) -> dict[str, Any]:
    """The part of ``seat``'s view the greedy policy reads (:meth:`.greedy._Seen.of_view`),
    in the view's own shape and with nothing else: the game, the seat, phase and stage, the
    rondel; of the board its borders, sailing ranges, free steps and each column's base VP,
    coins and VP (no ids, no king's VP); the seat's own player entry less its number and
    name (the other seats' entries empty: only their number is read); each region's id,
    good, exploration, double loss and stack (an explored one's: the view's, None face
    down); each good's price and factory income; each building track's id, column, good,
    workers and price; the gallery; and of the action under way what has sailed and
    whether it explored. No ruleset name or file (the policy reads the board off this
    part), no scores, no other seat's assets. Made straight from the state, every value
    the same as :func:`view`'s (a test checks it field by field): what the engine sends a
    greedy bot seat instead of its whole view (issue 24: a 6 KB view made, encoded and
    parsed per bot move)."""
    rules = s.rules
    goods = rules.goods
    stone = s.stone[seat]
    mine = {
        "money": s.money[seat],
        "workers": s.workers[seat],
        "stone": stone if stone >= 0 else None,
        "ships": list(s.ships[seat]),
        "ships_in_supply": s.in_supply(seat),
        "colonies": {g: list(s.colonies[seat][i]) for i, g in enumerate(goods)},
        "factories": dict(zip(goods, s.factories[seat], strict=True)),
        "wildcard_factories": rules.ruleset.player.wildcard_factories,
        "shipyards": s.shipyards[seat],
        "churches": s.churches[seat],
        "explorers": s.explorers[seat],
        "privileges": dict(zip(COLUMNS, s.privileges[seat], strict=True)),
    }
    explored, stacks, region_good = s.explored, s.stacks, rules.region_good
    return {
        "game": NAME,
        "seat": seat,
        "phase": s.phase,
        "stage": s.stage,
        "rondel": list(rules.fields),
        "board": _policy_board(rules),
        "action": {"sailed": list(s.moved), "explored": s.explored_now},
        "players": [mine if p == seat else {} for p in range(s.n)],
        "regions": [
            {
                "id": region,
                "good": goods[region_good[r]] if region_good[r] >= 0 else None,
                "explored": explored >> r & 1 == 1,
                "double_loss": double_loss(rules, s.n, r),
                "tokens": list(stacks[r]) if explored >> r & 1 else None,
            }
            for r, region in enumerate(rules.regions)
        ],
        "market": [
            {
                "good": good,
                "price": rules.prices[s.market[g]][g],
                "factory_income": rules.factory_income[s.market[g]],
            }
            for g, good in enumerate(goods)
        ],
        "buildings": [
            {
                "id": t.id,
                "column": COLUMNS[t.column],
                "good": goods[t.good] if t.good >= 0 else None,
                "workers": t.workers,
                "price": s.price(i) if s.left[i] else None,
            }
            for i, t in enumerate(rules.tracks)
        ],
        "gallery": dict(zip(COLUMNS, s.gallery, strict=True)),
    }


def _policy_board(rules: Rules) -> dict[str, Any]:
    """The figures of :func:`board` the greedy policy reads: not the columns' ids (it
    reads them by index) nor the king's VP."""
    return {
        "borders": [list(pair) for pair in rules.ruleset.map.borders],
        "sailing_range": list(rules.ranges),
        "free_steps": rules.ruleset.rondel.free_steps,
        "columns": [
            {
                "base_vp": rules.base_vp[c],
                "coins": list(rules.coins[c]),
                "vp": list(rules.position_vp[c]),
            }
            for c in range(len(COLUMNS))
        ],
    }


def private_view(s: State, seat: int) -> dict[str, Any]:
    """What ``seat`` alone sees: its number and its legal commands."""
    return own_view(seat, legal_commands(s, seat))


def start_positions(s: State) -> list[int]:
    """Each seat's 0-based place in turn order: play goes round from the start player the
    setup drew (0 for every seat before the setup)."""
    return [(seat - s.start) % s.n for seat in range(s.n)]


def hidden_regions(s: State) -> list[int]:
    """Regions whose stacks lie face down."""
    return [r for r in range(len(s.rules.regions)) if not s.is_explored(r)]


def deal_hidden(s: State, pools: list[list[int]], regions: list[int], seed: int) -> None:
    """Shuffle each good's pool of unseen tokens (sorted first, so the deal depends on the
    public information and ``seed`` alone) into the face-down stacks and the removed ones."""
    chance = random.Random(seed)
    rules = s.rules
    for g, pool in enumerate(pools):
        tokens = sorted(pool)
        chance.shuffle(tokens)
        for r in regions:
            if rules.region_good[r] == g:
                size = len(s.stacks[r])
                s.stacks[r] = sorted(tokens[:size])
                del tokens[:size]
        s.removed[g] = sorted(tokens)


def determinize(state: State, seed: int) -> State:
    """A copy whose face-down stacks and removed tokens are redrawn from the tokens nobody
    has seen; everything a seat can see is unchanged."""
    s = state.copy()
    regions = hidden_regions(s)
    pools = [list(removed) for removed in s.removed]
    for r in regions:
        if s.rules.region_good[r] >= 0:
            pools[s.rules.region_good[r]] += s.stacks[r]
    deal_hidden(s, pools, regions, seed)
    return s
