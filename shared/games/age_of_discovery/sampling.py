"""Whole game states drawn from one seat's observation: the bots' determinizations.

A bot never receives the game state, only its seat's view. To search with the rules core it
needs complete states, so :class:`Sampler` rebuilds every public part from the view and draws
every hidden part consistently with it: the face-down tokens nobody has seen and the unused
tokens, the goods pile, the building piles, the discovery deck, the generator, and the
casualty choices other seats made in the battle being resolved (a seat sees who has chosen,
never what). ``view(sample_state(rules, view(s, seat), k), seat) == view(s, seat)``.

Hidden pools are sorted before they are shuffled, and only the view is read, so a sample
depends on what the seat can see and the seed alone.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from . import rng
from .commands import SPECIALIST_SPACES
from .decisions import _casualty_ranges, pending
from .evolve import UNIT
from .ruleset import Rules
from .state import GameState, blank_state

Observation = dict[str, Any]


def sample_state(rules: Rules, observation: Observation, seed: int) -> GameState:
    """One complete state consistent with ``observation`` (a seat's view), drawn by ``seed``."""
    return Sampler(rules, observation).sample(seed)


class Sampler:
    """Reads an observation once, then draws as many states from it as a search needs.

    The public state and the hidden pools are computed here; :meth:`sample` only shuffles
    them into a copy, which keeps the search's per-iteration cost low.
    """

    def __init__(self, rules: Rules, observation: Observation) -> None:
        o = observation
        self.base = s = _public_state(rules, o)
        self.hidden_regions = [
            r
            for r, region in enumerate(o["regions"])
            if region["token"] == "face_down" and region["known_token"] is None
        ]
        self.tokens = _token_pool(rules, o)
        self.goods = _goods_pool(rules, o)
        self.piles = _pile_pools(rules, o)
        won = {card for p in o["players"] for card in p["cards"]}
        self.deck = [c for c, card in enumerate(rules.ruleset.cards) if card.name not in won]
        self.choosers: list[tuple[int, int, int]] = []  # (seat, lowest, highest)
        battle = (o["resolving"] or {}).get("battle")
        if battle is not None:
            ranges = _casualty_ranges(s)
            for seat in battle["chosen"]:
                if seat == o["seat"] and "your_choice" in battle:
                    s.choices[seat] = battle["your_choice"]
                else:
                    self.choosers.append((seat, *ranges[seat]))
                    s.choices[seat] = ranges[seat][0]  # drawn again by every sample
        waiting = [d["seat"] for d in o["pending"]]
        assert [d.seat for d in pending(s)] == waiting, "the view's pending decisions differ"

    def sample(self, seed: int) -> GameState:
        """A copy of the public state with every hidden value drawn from ``seed``."""
        s = self.base.copy()
        g = rng.seed_state(seed)
        g, tokens = rng.shuffled(g, self.tokens)
        for r in self.hidden_regions:
            s.token_on[r] = tokens.pop()
        s.unused_tokens = tokens
        g, s.goods_pile = rng.shuffled(g, self.goods)
        for age, (pool, size) in enumerate(self.piles):
            g, pile = rng.shuffled(g, pool)
            s.piles[age] = pile[len(pile) - size :]
        g, s.deck = rng.shuffled(g, self.deck)
        for seat, lowest, highest in self.choosers:
            g, value = rng.next_u64(g)
            s.choices[seat] = lowest + value % (highest - lowest + 1)
        s.rng = rng.next_u64(g)[1]
        return s


def _public_state(rules: Rules, o: Observation) -> GameState:
    """Every public field of the state, read off the view; hidden pools left empty."""
    n = len(o["players"])
    s = blank_state(rules, n)
    goods, buildings = rules.good_index, rules.building_index
    cards = {card.name: c for c, card in enumerate(rules.ruleset.cards)}
    s.names = tuple(p["name"] for p in o["players"])
    s.turn, s.phase, s.version = o["turn"], o["phase"], o["version"]
    s.order = list(o["turn_order"])
    for seat, p in enumerate(o["players"]):
        s.money[seat] = p["money"]
        for name, count in p["available"].items():
            s.avail[seat][UNIT[name]] = count
        for name, count in p["next_turn"].items():
            s.next_units[seat][UNIT[name]] = count
        for name, count in p["goods"].items():
            s.goods[seat][goods[name]] = count
        s.ships[seat] = p["ships"]
        s.owned[seat] = [buildings[b] for b in p["buildings"]]
        s.university_used[seat] = p["university_used"]
        s.cards_won[seat] = [cards[c] for c in p["cards"]]
        s.colony_vp[seat] = list(p["colony_vp"])
        box = p["discovery_box"]
        s.disc[seat] = [box["colonists"], box["captains"], box["soldiers"]]
        s.received[seat] = p["units_received"]
        s.returned[seat] = p["units_returned"]
        s.income_sets[seat] = p["income_from_sets"]
    _assign_tokens(rules, o, s)
    for r, region in enumerate(o["regions"]):
        s.units[r] = list(region["units"])
        s.soldiers[r] = list(region["soldiers"])
        s.region_good[r] = region["good_present"]
        s.discovered[r] = region["discovered"]
    boxes = o["boxes"]
    s.initiative = list(boxes["initiative"])
    s.dock = [(e["seat"], UNIT[e["unit"]]) for e in boxes["dock"]]
    s.dock_x = -1 if boxes["dock_x"] is None else boxes["dock_x"]
    s.dock_y = -1 if boxes["dock_y"] is None else boxes["dock_y"]
    s.trade = list(boxes["goods"])
    s.shipping = [(e["seat"], UNIT[e["unit"]]) for e in boxes["shipping"]]
    s.bbox = list(boxes["buildings"])
    s.specialists = [
        -1 if boxes["specialists"][space] is None else boxes["specialists"][space]
        for space in SPECIALIST_SPACES
    ]
    s.warfare = list(boxes["warfare"])
    s.goods_revealed = [goods[g] for g in o["goods_revealed"]]
    s.revealed_buildings = [buildings[b] for b in o["buildings_revealed"]]
    s.ship_in_box = int(o["ship_in_box"])
    s.ship_supply = o["ships_in_supply"]
    _position(s, o)
    return s


def _position(s: GameState, o: Observation) -> None:
    """Where the game stands within its phase: the queue, the cursor, a battle, an auction."""
    waiting = [d["seat"] for d in o["pending"]]
    if s.phase == "placement":
        s.queue = s.order[:]
        s.cursor = s.queue.index(waiting[0]) if waiting else 0
        s.to_place = sum(sum(a) for a in s.avail)
    elif s.phase == "auction":
        auction = o["auction"]
        s.queue = list(auction["bidders"])
        s.cursor = s.queue.index(waiting[0]) if waiting else 0
        s.bid_high = auction["high_bid"]
        s.bid_seat = -1 if auction["high_bidder"] is None else auction["high_bidder"]
        s.auction_order = [-1 if p is None else p for p in auction["places"]]
        s.last_bid = list(auction["last_bids"])
    resolving = o["resolving"]
    if resolving is not None:
        s.queue = [tuple(q) if isinstance(q, list) else q for q in resolving["queue"]]
        s.cursor = resolving["cursor"]
        battle = resolving.get("battle")
        if battle is not None:
            s.battles = [s.rules.region_index[r] for r in battle["remaining"]]
            s.attacker, s.defender = battle["attacker"], battle["defender"]


def _values(token: dict[str, int]) -> tuple[int, int, int, int]:
    return (token["money"], token["plunder"], token["natives"], token["vp"])


def _assign_tokens(rules: Rules, o: Observation, s: GameState) -> None:
    """Seen tokens (won, or turned up by a failed expedition) get indices with their values.

    Tokens with equal values are interchangeable, so the lowest free index is taken.
    """
    free = list(range(len(rules.tokens)))

    def take(token: dict[str, int]) -> int:
        index = next(t for t in free if rules.tokens[t] == _values(token))
        free.remove(index)
        return index

    for seat, p in enumerate(o["players"]):
        s.tokens_won[seat] = [take(t) for t in p["tokens"]]
    for r, region in enumerate(o["regions"]):
        if region["known_token"] is not None:
            s.token_on[r] = take(region["known_token"])
            s.token_known[r] = True


def _token_pool(rules: Rules, o: Observation) -> list[int]:
    """The tokens nobody has seen: face down on the map, or never used."""
    seen = Counter(_values(t) for p in o["players"] for t in p["tokens"])
    seen += Counter(_values(r["known_token"]) for r in o["regions"] if r["known_token"])
    pool = []
    for t, values in enumerate(rules.tokens):
        if seen[values]:
            seen[values] -= 1
        else:
            pool.append(t)
    return pool


def _goods_pool(rules: Rules, o: Observation) -> list[int]:
    """The goods pile: every good not on a region, not owned and not revealed."""
    left = list(rules.good_counts)
    for r, region in enumerate(o["regions"]):
        if region["good_present"]:
            left[rules.region_good[r]] -= 1
    for p in o["players"]:
        for name, count in p["goods"].items():
            left[rules.good_index[name]] -= count
    for name in o["goods_revealed"]:
        left[rules.good_index[name]] -= 1
    pool = [g for g, count in enumerate(left) for _ in range(count)]
    assert len(pool) == o["goods_pile_size"], "the view's goods do not add up"
    return pool


def _pile_pools(rules: Rules, o: Observation) -> list[tuple[list[int], int]]:
    """Per age: the buildings that may still be in its pile, and the pile's size.

    A pile holds its age's buildings less those bought or on offer. Those left on offer when
    an age ended were removed; the view does not list them, but that pile is never drawn
    from again, so any choice of the right size serves.
    """
    gone = Counter(rules.building_index[b] for p in o["players"] for b in p["buildings"])
    gone += Counter(rules.building_index[b] for b in o["buildings_revealed"])
    out = []
    for age, size in enumerate(o["building_piles"]):
        pool = sorted((Counter(rules.piles[age]) - gone).elements())
        assert len(pool) >= size, "the view's buildings do not add up"
        out.append((pool, size))
    return out
