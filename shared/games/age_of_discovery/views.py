"""What a seat (or a spectator) may see, and hidden-information resampling.

Public: everything players own, the map, revealed goods and buildings, every token or card
once revealed. Hidden: face-down tokens, the unused tokens, pile and deck orders, the
generator. ``view`` is built field by field from public parts only, so nothing hidden can
leak by accident; ``determinize`` resamples exactly the hidden parts (for tests and for the
bots' information-set search).
"""

from __future__ import annotations

from typing import Any

from ..protocol import merge_views, own_view
from ..ruleset_files import CARRIED
from . import rng
from .commands import SPECIALIST_SPACES
from .engine import legal_commands, pending
from .ruleset import UNITS
from .scoring import score
from .state import GameState

_DISCOVERY_SLOTS = ("colonists", "captains", "soldiers")


def _token(s: GameState, token: int) -> dict[str, int]:
    money, plunder, natives, vp = s.rules.tokens[token]
    return {"money": money, "plunder": plunder, "natives": natives, "vp": vp}


def _player(s: GameState, seat: int) -> dict[str, Any]:
    rules = s.rules
    nation = rules.ruleset.nations[seat]
    return {
        "seat": seat,
        "name": s.names[seat],
        "nation": nation.name,
        "color": nation.color,
        "money": s.money[seat],
        "available": {UNITS[u]: c for u, c in enumerate(s.avail[seat]) if c},
        "next_turn": {UNITS[u]: c for u, c in enumerate(s.next_units[seat]) if c},
        "goods": {rules.goods[g]: c for g, c in enumerate(s.goods[seat]) if c},
        "ships": s.ships[seat],
        "buildings": [rules.buildings[b].id for b in s.owned[seat]],
        "university_used": s.university_used[seat],
        "tokens": [_token(s, t) for t in s.tokens_won[seat]],
        "cards": [rules.ruleset.cards[c].name for c in s.cards_won[seat]],
        "colony_vp": list(s.colony_vp[seat]),
        "discovery_box": dict(zip(_DISCOVERY_SLOTS, s.disc[seat], strict=True)),
        # Counters of public events, so that a bot's sampled state is whole (see sampling).
        "units_received": s.received[seat],
        "units_returned": s.returned[seat],
        "income_from_sets": s.income_sets[seat],  # paid this turn: turn 8's is economy VP
    }


def _region(s: GameState, r: int) -> dict[str, Any]:
    rules = s.rules
    face_down = s.token_on[r] >= 0
    return {
        "id": rules.regions[r],
        "good": rules.goods[rules.region_good[r]],
        "good_present": s.region_good[r],
        "discovered": s.discovered[r],
        "token": "face_down" if face_down else None,
        # A failed expedition turned the token up for everyone before it went back face down.
        "known_token": _token(s, s.token_on[r]) if face_down and s.token_known[r] else None,
        "units": list(s.units[r]),
        "soldiers": list(s.soldiers[r]),
    }


def _boxes(s: GameState) -> dict[str, Any]:
    return {
        "initiative": list(s.initiative),
        "dock": [{"seat": seat, "unit": UNITS[u]} for seat, u in s.dock],
        "dock_x": s.dock_x if s.dock_x >= 0 else None,
        "dock_y": s.dock_y if s.dock_y >= 0 else None,
        "goods": list(s.trade),
        "shipping": [{"seat": seat, "unit": UNITS[u]} for seat, u in s.shipping],
        "buildings": list(s.bbox),
        "specialists": {
            space: (seat if seat >= 0 else None)
            for space, seat in zip(SPECIALIST_SPACES, s.specialists, strict=True)
        },
        "warfare": list(s.warfare),
    }


def view(s: GameState, seat: int | None = None) -> dict[str, Any]:
    """Everything ``seat`` may see (``None``: a spectator). JSON-ready; never a hidden value:
    the public view, with the seat's private part set over it."""
    public = public_view(s)
    return public if seat is None else merge_views(public, private_view(s, seat))


def public_view(s: GameState) -> dict[str, Any]:
    """What every seat and the spectators see: the spectator's view."""
    rules = s.rules
    out: dict[str, Any] = {
        "game": "age_of_discovery",
        "ruleset": rules.ruleset.name,
        "options": dict(rules.options),
        **({} if rules.file is None else {CARRIED: rules.file}),
        "seat": None,
        "turn": s.turn,
        "age": rules.age_of_turn(max(s.turn, 1)),
        "phase": s.phase,
        "version": s.version,
        "pending": [{"seat": d.seat, "kind": d.kind} for d in pending(s)],
        "turn_order": list(s.order),
        "players": [_player(s, p) for p in range(s.n)],
        "regions": [_region(s, r) for r in range(len(rules.regions))],
        "boxes": _boxes(s),
        "resolving": _resolving(s),
        "goods_revealed": [rules.goods[g] for g in s.goods_revealed],
        "goods_pile_size": len(s.goods_pile),
        "buildings_revealed": [rules.buildings[b].id for b in s.revealed_buildings],
        "building_piles": [len(p) for p in s.piles],
        "discovery_deck": len(s.deck),
        "ship_in_box": bool(s.ship_in_box),
        "ships_in_supply": s.ship_supply,
        "scores": score(s),
    }
    if s.phase == "auction":
        out["auction"] = {
            "high_bid": s.bid_high,
            "high_bidder": s.bid_seat if s.bid_seat >= 0 else None,
            "bidders": list(s.queue),
            "places": [p if p >= 0 else None for p in s.auction_order],
            "last_bids": list(s.last_bid),
        }
    return out


def policy_view(s: GameState, seat: int) -> dict[str, Any]:
    """The part of ``seat``'s view the greedy policy reads (:func:`.greedy._Seen.of_view`),
    in the view's own shape and with nothing else: the game, its ruleset (and the ruleset
    file it carries), the seat, turn, age and phase; the seat's own money, goods, ships,
    buildings and discovery box (the other seats' entries empty: only their number is read);
    each region's good, discovery, token and units; the Initiative and Merchant Shipping
    boxes; the ship, the goods and buildings revealed and the discovery deck's size. Made
    straight from the state, every value the same as :func:`view`'s (a test checks it field
    by field): what the engine sends a greedy bot seat instead of its whole view (issue 24:
    the view made, encoded and parsed per bot move was a fifth of the services' CPU)."""
    rules = s.rules
    goods = rules.goods
    mine = {
        "money": s.money[seat],
        "goods": {goods[g]: c for g, c in enumerate(s.goods[seat]) if c},
        "ships": s.ships[seat],
        "buildings": [rules.buildings[b].id for b in s.owned[seat]],
        "discovery_box": dict(zip(_DISCOVERY_SLOTS, s.disc[seat], strict=True)),
    }
    token_on, known = s.token_on, s.token_known
    return {
        "game": "age_of_discovery",
        "ruleset": rules.ruleset.name,
        **({} if rules.file is None else {CARRIED: rules.file}),
        "seat": seat,
        "turn": s.turn,
        "age": rules.age_of_turn(max(s.turn, 1)),
        "phase": s.phase,
        "players": [mine if p == seat else {} for p in range(s.n)],
        "regions": [
            {
                "good_present": s.region_good[r],
                "discovered": s.discovered[r],
                "token": "face_down" if token_on[r] >= 0 else None,
                "known_token": _token(s, token_on[r]) if token_on[r] >= 0 and known[r] else None,
                "units": list(s.units[r]),
                "soldiers": list(s.soldiers[r]),
            }
            for r in range(len(rules.regions))
        ],
        "boxes": {
            "initiative": list(s.initiative),
            "shipping": [{"seat": owner, "unit": UNITS[u]} for owner, u in s.shipping],
        },
        "ship_in_box": bool(s.ship_in_box),
        "goods_revealed": [goods[g] for g in s.goods_revealed],
        "buildings_revealed": [rules.buildings[b].id for b in s.revealed_buildings],
        "discovery_deck": len(s.deck),
    }


def _resolving(s: GameState) -> dict[str, Any] | None:
    """The entry being resolved: whose turn it is in the current box, and any battle."""
    if s.phase in ("setup", "placement", "over", "auction"):
        return None
    out: dict[str, Any] = {"queue": [list(q) if isinstance(q, tuple) else q for q in s.queue]}
    out["cursor"] = s.cursor
    if s.battles:
        out["battle"] = {
            "region": s.rules.regions[s.battles[0]],
            "attacker": s.attacker,
            "defender": s.defender,
            "remaining": [s.rules.regions[r] for r in s.battles],
            "chosen": sorted(s.choices),  # who has chosen, never what
        }
    return out


def private_view(s: GameState, seat: int) -> dict[str, Any]:
    """What ``seat`` alone sees: its number, its legal commands, and its own casualty pick
    in a battle (the public view says only who has chosen)."""
    return {**own_view(seat, legal_commands(s, seat)), **_own_choice(s, seat)}


def private_part(s: GameState, seat: int) -> dict[str, Any]:
    """:func:`private_view` without the legal commands (the engine lists them already)."""
    return {"seat": seat, **_own_choice(s, seat)}


def _own_choice(s: GameState, seat: int) -> dict[str, Any]:
    """The resolving entry with the seat's own casualty pick, while it has one to keep."""
    if s.battles and seat in s.choices:
        resolving = _resolving(s)
        if resolving is not None:
            resolving["battle"]["your_choice"] = s.choices[seat]
            return {"resolving": resolving}
    return {}


def start_positions(s: GameState) -> list[int]:
    """Each seat's 0-based place in the turn order of the first turn: the order the setup
    drew (or the starting auction bid for) before the first turn begins."""
    order = s.start_order if s.start_order else list(range(s.n))
    return [order.index(seat) for seat in range(s.n)]


def determinize(state: GameState, seed: int) -> GameState:
    """A copy of ``state`` whose hidden values are resampled consistently with the public ones.

    Face-down tokens whose values nobody has seen are shuffled with the unused tokens; the
    goods pile, the building piles and the discovery deck are reshuffled; the generator is
    reseeded. Everything a seat can see is unchanged.

    Each pool is sorted before it is shuffled, so the result depends on the public
    information and ``seed`` alone: it reveals nothing of the hidden orders it replaces.
    """
    s = state.copy()
    g = rng.seed_state(seed)
    hidden_regions = [r for r, t in enumerate(s.token_on) if t >= 0 and not s.token_known[r]]
    pool = sorted([s.token_on[r] for r in hidden_regions] + s.unused_tokens)
    g, pool = rng.shuffled(g, pool)
    for r in hidden_regions:
        s.token_on[r] = pool.pop()
    s.unused_tokens = pool
    g, s.goods_pile = rng.shuffled(g, sorted(s.goods_pile))
    for age, pile in enumerate(s.piles):
        g, s.piles[age] = rng.shuffled(g, sorted(pile))
    g, s.deck = rng.shuffled(g, sorted(s.deck))
    s.rng = rng.next_u64(g)[0]
    return s
