"""Targeted rule tests (rules spec /work/shared/rules/age-of-discovery.md, section numbers in
the docstrings), each set up as a small situation and played through the public API."""

from __future__ import annotations

import json
from itertools import combinations
from random import Random

import pytest

from shared.contracts import load_event
from shared.eventstore.codec import to_event
from shared.games import api
from shared.games.age_of_discovery import (
    Battle,
    Bid,
    BuyBuilding,
    Casualties,
    Command,
    Decision,
    Event,
    Expedition,
    GameState,
    Land,
    Migrate,
    MoveSoldier,
    Pass,
    Place,
    RuleViolation,
    TakeGood,
    TakeSpecialist,
    UseUniversity,
    War,
    decide,
    decide_into,
    legal_commands,
    pending,
    score,
    view,
)
from shared.games.age_of_discovery.income import set_income

from ..strategies import Spec
from .scenarios import (
    card_on_top,
    discover,
    discover_all,
    events_of,
    game,
    give_building,
    good,
    money_events,
    offer_only,
    place_in_order,
    put_token,
    region,
    rules,
    run,
    set_units,
    start_placement,
    token_with,
)


def _violation(state: GameState, command: Command) -> str:
    """The code of the violation ``command`` raises; the state must be left unchanged."""
    before = state.state_hash()
    with pytest.raises(RuleViolation) as refused:
        decide(state, command)
    assert state.state_hash() == before
    return refused.value.code


# --- Colonist Dock: arrivals (§4, §5) --------------------------------------------------------


def _land_one(unit: str, *, cathedral: bool = False) -> tuple[GameState, list[Event]]:
    """Seat 0 sends one ``unit`` through the Colonist Dock to the Caribbean (Florida being
    discovered too, the landing is a real choice)."""
    state = game(players=2)
    discover(state, "florida")
    if cathedral:
        give_building(state, 0, "cathedral")
    start_placement(state, {0: {unit: 1}})
    place_in_order(state, [(0, unit, "dock")])
    assert pending(state) == (Decision(0, "land"),)
    events = decide_into(state, Land(0, "caribbean"))
    return state, events


@pytest.mark.parametrize(("unit", "paid"), [("merchant", 5), ("colonist", 0), ("captain", 0)])
def test_merchant_landing_pays_five(unit: str, paid: int) -> None:
    """§4 Merchant: arriving in the New World from the Colonist Dock pays $5 at once (and no
    other unit does)."""
    state, events = _land_one(unit)
    expected = [(0, paid)] if paid else []
    assert money_events(events, "merchant") == expected
    # Paid right at the landing, before the rest of the turn.
    types = [e.type for e in events]
    if paid:
        assert types.index("money") == types.index("landed") + 1
    assert state.units[region(state, "caribbean")][0] == 1


@pytest.mark.parametrize(("cathedral", "extra"), [(False, 1), (True, 2)])
def test_missionary_adds_colonists(cathedral: bool, extra: int) -> None:
    """§4 Missionary: arriving from the Colonist Dock adds 1 free colonist in the same region,
    2 with Cathedral (§8)."""
    state, events = _land_one("missionary", cathedral=cathedral)
    (added,) = [d for d in events_of(events, "units_added") if d["reason"] == "missionary"]
    assert (added["region"], added["colonists"], added["soldiers"]) == ("caribbean", extra, 0)
    assert state.units[region(state, "caribbean")][0] == 1 + extra
    # With Cathedral that makes 3 units: the first 3 in the Caribbean take its sugar (§5).
    assert state.goods[0][good(state, "sugar")] == (1 if 1 + extra >= 3 else 0)


def test_first_to_three_units_takes_the_region_good() -> None:
    """§5 Colonist Dock: the first player to have 3 units in a region takes the region's good;
    a second player reaching 3 later gets nothing (the good is gone)."""
    state = game(players=2)
    discover(state, "florida")
    sugar, caribbean = good(state, "sugar"), region(state, "caribbean")
    set_units(state, "caribbean", 0, 2)
    set_units(state, "caribbean", 1, 2)
    start_placement(state, {0: {"colonist": 1}, 1: {"colonist": 1}}, order=[1, 0])
    place_in_order(state, [(1, "colonist", "dock"), (0, "colonist", "dock")])
    first = decide_into(state, Land(1, "caribbean"))
    assert events_of(first, "good_taken") == [
        {"seat": 1, "good": "sugar", "source": "region", "region": "caribbean"}
    ]
    second = decide_into(state, Land(0, "caribbean"))
    assert events_of(second, "good_taken") == []
    assert state.units[caribbean] == [3, 3]
    assert (state.goods[0][sugar], state.goods[1][sugar]) == (0, 1)
    assert state.region_good[caribbean] is False
    assert view(state)["regions"][caribbean]["good_present"] is False


# --- Discovery (§5, §9, §10) -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("units", "sent"),
    [
        ({"colonist": 1, "soldier": 1}, (1, 0, 1)),  # 1 + 1 >= 2 natives, with plunder
        ({"captain": 1}, (0, 1, 0)),  # a captain counts 2
    ],
)
def test_expedition_success(units: dict[str, int], sent: tuple[int, int, int]) -> None:
    """§5 Discovery: success when the value sent (captain 2, others 1) is at least the
    natives: a free colonist in the region, the token (VP), its $ and plunder $ per soldier;
    the sent units go back to the supply."""
    state = game(players=2)
    token = token_with(state, natives=2)
    money, plunder, natives, vp = state.rules.tokens[token]
    put_token(state, "florida", token)
    start_placement(state, {0: units})
    place_in_order(state, [(0, unit, "discovery") for unit, n in units.items() for _ in range(n)])
    assert pending(state) == (Decision(0, "expedition"),)
    # While a region is undiscovered, the deck cannot be the target.
    assert _violation(state, Expedition(0, *sent, None)) == "illegal_region"

    before = state.money[0]
    events = decide_into(state, Expedition(0, *sent, "florida"))
    (expedition,) = events_of(events, "expedition")
    assert expedition["success"] is True
    assert expedition["token"]["natives"] == natives
    soldiers = sent[2]
    assert money_events(events, "discovery") == [(0, money + plunder * soldiers)]
    florida = region(state, "florida")
    assert (state.units[florida][0], state.soldiers[florida][0]) == (1, 0)
    assert state.discovered[florida] and state.token_on[florida] == -1
    assert state.tokens_won[0] == [token]
    assert state.disc[0] == [0, 0, 0]
    assert state.money[0] == before + money + plunder * soldiers
    assert score(state)[0]["discoveries"] == vp


def test_expedition_failure_reveals_the_token_publicly() -> None:
    """§5 Discovery / §10: on failure the token goes back face down on its region, its values
    now public (visible in every view); the sent units return to supply, those not sent stay
    in Discovery."""
    state = game(players=2)
    token = token_with(state, natives=5)
    money, plunder, natives, vp = state.rules.tokens[token]
    put_token(state, "florida", token)
    florida = region(state, "florida")
    start_placement(state, {0: {"colonist": 2, "soldier": 1}})
    place_in_order(
        state,
        [(0, "colonist", "discovery"), (0, "colonist", "discovery"), (0, "soldier", "discovery")],
    )
    for seat in (None, 0, 1):
        shown = view(state, seat)["regions"][florida]
        assert (shown["token"], shown["known_token"]) == ("face_down", None)

    before = state.money[0]
    events = decide_into(state, Expedition(0, 1, 0, 1, "florida"))
    (expedition,) = [e for e in events if e.type == "expedition"]
    assert expedition.visibility == "public"
    assert expedition.data["success"] is False
    assert expedition.data["token"]["natives"] == natives
    assert not state.discovered[florida]
    assert state.token_on[florida] == token
    assert state.tokens_won[0] == []
    assert state.units[florida] == [0, 0]
    assert state.money[0] == before
    assert state.disc[0] == [1, 0, 0]  # the colonist not sent stays for a later expedition
    known = {"money": money, "plunder": plunder, "natives": natives, "vp": vp}
    for seat in (None, 0, 1):
        shown = view(state, seat)["regions"][florida]
        assert (shown["token"], shown["known_token"]) == ("face_down", known)


def test_discovery_cards_once_every_region_is_discovered() -> None:
    """§5 Discovery: once every region is discovered, an expedition draws the top card:
    success keeps it (VP, $, plunder; no colonist placed); failure shuffles it back."""
    state = game(players=2)
    discover_all(state)
    card = card_on_top(state, "The Mississippi")
    money, plunder, natives, vp = state.rules.cards[card]
    start_placement(state, {0: {"captain": 1, "soldier": 1}, 1: {"colonist": 1}}, order=[0, 1])
    place_in_order(
        state,
        [(0, "captain", "discovery"), (1, "colonist", "discovery"), (0, "soldier", "discovery")],
    )
    legal = legal_commands(state, 0)
    assert {c.region for c in legal if isinstance(c, Expedition)} == {None}
    assert _violation(state, Expedition(0, 0, 1, 1, "florida")) == "illegal_region"

    units_before = [row[:] for row in state.units]
    events = decide_into(state, Expedition(0, 0, 1, 1, None))
    (expedition,) = events_of(events, "expedition")
    assert expedition["success"] is True and natives <= 2 + 1
    assert expedition["card"]["name"] == "The Mississippi"
    assert money_events(events, "discovery") == [(0, money + plunder * 1)]
    assert state.cards_won[0] == [card]
    assert card not in state.deck
    assert events_of(events, "units_added") == []
    assert state.units == units_before
    assert score(state)[0]["discoveries"] == vp

    # Seat 1 draws China (6 natives) with one colonist: it fails and goes back in the deck.
    china = card_on_top(state, "China")
    deck_size = len(state.deck)
    assert pending(state) == (Decision(1, "expedition"),)
    events = decide_into(state, Expedition(1, 1, 0, 0, None))
    (expedition,) = events_of(events, "expedition")
    assert expedition["success"] is False and expedition["card"]["name"] == "China"
    assert len(events_of(events, "deck_shuffled")) == 1
    assert state.cards_won[1] == []
    assert china in state.deck and len(state.deck) == deck_size
    assert money_events(events, "discovery") == []


# --- Specialists: training (§5) --------------------------------------------------------------


@pytest.mark.parametrize(("money", "trained"), [(5, True), (4, False)])
def test_training_costs_five(money: int, trained: bool) -> None:
    """§5 Specialists: the training space may pay $5 for one specialist of any kind, usable
    next turn; a player with less than $5 cannot train."""
    state = game(players=2)
    state.money[0] = money
    start_placement(state, {0: {"colonist": 1}})
    events = place_in_order(state, [(0, "colonist", "specialists", "training")])
    if trained:
        assert pending(state) == (Decision(0, "specialist"),)
        assert TakeSpecialist(0, "soldier") in legal_commands(state, 0)
        events = decide_into(state, TakeSpecialist(0, "soldier"))
        assert money_events(events, "training") == [(0, -5)]
    else:
        assert events_of(events, "specialist_gained") == []
        assert money_events(events, "training") == []
    assert state.turn == 2
    assert state.money[0] == money - (5 if trained else 0)
    assert state.avail[0] == [5, 0, 0, 0, 1 if trained else 0]


# --- Auction variant (§11) -------------------------------------------------------------------


def test_auction_runner_up_with_bid_of_eight_takes_a_specialist() -> None:
    """§11: bids in seat order. The first to pass takes the last place; the runner-up pays
    half its last bid rounded up and, having bid >= $8, takes a free specialist of its choice;
    the winner takes space 1, pays its bid, takes an unused token for the Caribbean (its $,
    no plunder) and a colonist there that is not one of its 5. No compensation is paid."""
    state = game(players=3, starting_order="auction")
    assert state.phase == "auction"
    assert pending(state) == (Decision(0, "bid"),)
    assert state.money == [10, 10, 10]
    on_map = set(state.token_on)
    unused = list(state.unused_tokens)
    token = unused[-1]
    token_money = state.rules.tokens[token][0]

    decide_into(state, Bid(0, 8))
    decide_into(state, Bid(1, 9))
    assert _violation(state, Bid(2, 9)) == "illegal"  # a bid must be higher
    decide_into(state, Pass(2))
    events = decide_into(state, Pass(0))

    assert state.order == [1, 0, 2]
    assert money_events(events, "auction") == [(1, -9), (0, -4)]
    assert money_events(events, "compensation") == []
    (caribbean,) = events_of(events, "caribbean_token")
    assert caribbean["seat"] == 1 and caribbean["token"]["index"] == token
    assert token not in on_map and token in unused
    assert state.tokens_won[1] == [token]
    assert state.unused_tokens == unused[:-1]
    assert state.money == [6, 10 - 9 + token_money, 10]
    assert state.units[region(state, "caribbean")] == [0, 1, 0]

    assert pending(state) == (Decision(0, "specialist"),)
    choices = legal_commands(state, 0)
    assert set(choices) == {
        TakeSpecialist(0, u) for u in ("captain", "merchant", "missionary", "soldier")
    }
    decide_into(state, TakeSpecialist(0, "merchant"))
    assert state.turn == 1 and state.phase == "placement"
    assert state.avail == [[5, 0, 1, 0, 0], [5, 0, 0, 0, 0], [5, 0, 0, 0, 0]]
    assert pending(state) == (Decision(1, "place"),)
    assert state.money[0] == 6  # the specialist is free


def test_auction_runner_up_below_eight_gets_no_specialist() -> None:
    """§11 (rulebook example): a runner-up whose last bid was $7 pays $4 and, under $8, gets
    no specialist; the winner's colonist in the Caribbean is an extra unit."""
    state = game(players=2, starting_order="auction")
    decide_into(state, Bid(0, 7))
    decide_into(state, Bid(1, 8))
    events = decide_into(state, Pass(0))
    assert money_events(events, "auction") == [(1, -8), (0, -4)]
    assert state.order == [1, 0]
    assert state.phase == "placement" and state.turn == 1
    assert state.avail == [[5, 0, 0, 0, 0], [5, 0, 0, 0, 0]]
    assert state.units[region(state, "caribbean")] == [0, 1]


# --- Buildings: Privateers, Militia, Stable, Migration (§8) ----------------------------------


def test_privateers_collects_after_income() -> None:
    """§8 Privateers: $1 from every other player per ship the owner has, collected after
    income; a player pays what they can."""
    state = game(players=3)
    give_building(state, 0, "privateers")
    state.ships[0] = 2
    state.money = [10, 10, 0]
    state.goods[2][good(state, "gold")] = 1
    state.goods[2][good(state, "fish")] = 1
    state.goods[2][good(state, "rice")] = 1  # any three: $1 of income for seat 2
    start_placement(state, {0: {"colonist": 1}})
    events = place_in_order(state, [(0, "colonist", "warfare")])
    assert money_events(events, "income") == [(2, 1)]
    assert money_events(events, "privateers") == [(1, -2), (0, 2), (2, -1), (0, 1)]
    reasons = [d["reason"] for d in events_of(events, "money")]
    assert reasons.index("income") < reasons.index("privateers")
    assert state.money == [13, 8, 0]


def _battle(attacker: int, militia_owner: int | None) -> GameState:
    """Caribbean: seat 0 has a soldier and a colonist, seat 1 two colonists; ``attacker``
    starts a battle there."""
    state = game(players=2)
    if militia_owner is not None:
        give_building(state, militia_owner, "militia")
    set_units(state, "caribbean", 0, 2, soldiers=1)
    set_units(state, "caribbean", 1, 2)
    start_placement(state, {attacker: {"colonist": 1}})
    place_in_order(state, [(attacker, "colonist", "warfare")])
    decide_into(state, Battle(attacker, "caribbean", 1 - attacker))
    return state


def test_militia_adds_a_soldier_when_defending() -> None:
    """§8 Militia: +1 temporary soldier in each battle its owner did not start. Attacked by
    seat 0, seat 1 (no soldier, Militia) kills one unit of its choice."""
    state = _battle(attacker=0, militia_owner=1)
    assert pending(state) == (Decision(1, "casualties"),)
    assert set(legal_commands(state, 1)) == {Casualties(1, 0), Casualties(1, 1)}
    events = decide_into(state, Casualties(1, 1))
    (resolved,) = events_of(events, "battle_resolved")
    assert sorted(resolved["losses"]) == [[0, 0, 1], [1, 1, 0]]
    caribbean = region(state, "caribbean")
    assert state.units[caribbean] == [1, 1]
    assert state.soldiers[caribbean] == [0, 0]


@pytest.mark.parametrize(("attacker", "militia_owner"), [(1, 1), (0, None)])
def test_militia_gives_nothing_to_the_attacker(attacker: int, militia_owner: int | None) -> None:
    """§8 Militia: no extra soldier in a battle its owner started (nor without Militia): seat
    1, with no soldier, kills nothing; seat 0's soldier kills one of its colonists."""
    state = _battle(attacker=attacker, militia_owner=militia_owner)
    assert state.turn == 2  # nobody had a choice: the battle resolved and the turn ended
    caribbean = region(state, "caribbean")
    assert state.units[caribbean] == [2, 1]
    assert state.soldiers[caribbean] == [1, 0]


def _upkeep(building: str) -> GameState:
    state = game(players=2)
    give_building(state, 0, building)
    discover(state, "florida", "canada")
    start_placement(state, {0: {"colonist": 1}})
    return state


def test_stable_moves_one_soldier_to_an_adjacent_region() -> None:
    """§8 Stable: once per turn in phase D, move 1 soldier to an adjacent region (Caribbean
    is adjacent to Florida, not to Canada)."""
    state = _upkeep("stable")
    set_units(state, "caribbean", 0, 3, soldiers=2)
    place_in_order(state, [(0, "colonist", "warfare")])
    assert pending(state) == (Decision(0, "move"),)
    legal = legal_commands(state, 0)
    assert MoveSoldier(0, "caribbean", "florida") in legal
    assert not any(isinstance(c, Migrate) for c in legal)
    assert _violation(state, MoveSoldier(0, "caribbean", "canada")) == "illegal"
    decide_into(state, MoveSoldier(0, "caribbean", "florida"))
    caribbean, florida = region(state, "caribbean"), region(state, "florida")
    assert (state.units[caribbean][0], state.soldiers[caribbean][0]) == (2, 1)
    assert (state.units[florida][0], state.soldiers[florida][0]) == (1, 1)
    assert state.turn == 2  # one move per turn: the turn went on


def test_migration_moves_up_to_two_colonists() -> None:
    """§8 Migration: each turn in phase D, move up to 2 colonists (not soldiers) from one
    region to one other; arriving at 3 units takes the region good."""
    state = _upkeep("migration")
    set_units(state, "caribbean", 0, 4, soldiers=1)
    set_units(state, "florida", 0, 1)
    place_in_order(state, [(0, "colonist", "warfare")])
    assert pending(state) == (Decision(0, "move"),)
    legal = legal_commands(state, 0)
    assert Migrate(0, "caribbean", "florida", 2) in legal
    assert Migrate(0, "caribbean", "florida", 3) not in legal
    assert not any(isinstance(c, MoveSoldier) for c in legal)
    assert _violation(state, Migrate(0, "caribbean", "florida", 3)) == "illegal"
    events = decide_into(state, Migrate(0, "caribbean", "florida", 2))
    caribbean, florida = region(state, "caribbean"), region(state, "florida")
    assert (state.units[caribbean][0], state.soldiers[caribbean][0]) == (2, 1)
    assert (state.units[florida][0], state.soldiers[florida][0]) == (3, 0)
    assert [d["good"] for d in events_of(events, "good_taken")] == ["tobacco"]


def test_migration_never_moves_soldiers() -> None:
    """§8 Migration moves colonists: with one colonist and three soldiers, at most 1 moves."""
    state = _upkeep("migration")
    set_units(state, "caribbean", 0, 4, soldiers=3)
    place_in_order(state, [(0, "colonist", "warfare")])
    counts = {c.count for c in legal_commands(state, 0) if isinstance(c, Migrate)}
    assert counts == {1}


# --- Other capital buildings (§8) ------------------------------------------------------------


def test_dock_spaces_x_and_y_resolve_after_the_numbered_spaces() -> None:
    """§5 Colonist Dock / §8 Indentured Servitude (X) and Colonization Laws (Y): the free
    colonists are put on X and Y in phase D and land in the next resolution, after the
    numbered spaces, X before Y."""
    state = game(players=2)
    give_building(state, 0, "indentured_servitude")
    give_building(state, 1, "colonization_laws")
    start_placement(state, {0: {"colonist": 1}}, order=[1, 0])
    events = place_in_order(state, [(0, "colonist", "warfare")])
    assert [(d["seat"], d["space"]) for d in events_of(events, "dock_reserved")] == [
        (0, "X"),
        (1, "Y"),
    ]
    assert (state.dock_x, state.dock_y) == (0, 1)
    # Turn 2: the three numbered spaces (2 x 2 - 1) are taken by 1, 0, 1.
    events = place_in_order(
        state, [(1, "colonist", "dock"), (0, "colonist", "dock"), (1, "colonist", "dock")]
    )
    events += run(state, until="turn_started")
    assert [d["seat"] for d in events_of(events, "landed")] == [1, 0, 1, 0, 1]
    assert state.units[region(state, "caribbean")] == [2, 3]


def test_free_discovery_units_are_added_in_phase_d() -> None:
    """§8 Conquistador (a free soldier in Discovery every turn) and Navigator (a free
    captain): added in phase D, they can go on an expedition in the next turn."""
    state = game(players=2)
    give_building(state, 0, "conquistador")
    give_building(state, 1, "navigator")
    start_placement(state, {0: {"colonist": 1}})
    events = place_in_order(state, [(0, "colonist", "warfare")])
    added = [(d["seat"], d["unit"]) for d in events_of(events, "discovery_unit_added")]
    assert added == [(0, "soldier"), (1, "captain")]
    assert state.disc == [[0, 0, 1], [0, 1, 0]]
    assert state.turn == 2


@pytest.mark.parametrize(
    ("building", "options", "amount"),
    [
        ("trading_post", {}, 5),
        ("taxation", {}, 10),
        ("factory", {}, 25),
        ("factory", {"factory_income": 30}, 30),
    ],
)
def test_recurring_money(building: str, options: dict[str, int], amount: int) -> None:
    """§8 Trading Post +$5, Taxation +$10, Factory +$25 (+$30 in the Russian edition option),
    every turn in phase D."""
    state = game(players=2, **options)
    give_building(state, 1, building)
    before = state.money[:]
    start_placement(state, {0: {"colonist": 1}})
    events = place_in_order(state, [(0, "colonist", "warfare")])
    assert money_events(events, building) == [(1, amount)]
    assert state.money == [before[0], before[1] + amount]


@pytest.mark.parametrize(
    ("building", "tile_set", "goods", "amount"),
    [
        ("rum_distillery", "standard", {"sugar": 2}, 2 * 3),
        ("rum_distillery", "standard", {"sugar": 3}, 3 + 3 * 3),  # plus the set of three
        ("mint", "extended", {"gold": 1, "silver": 2}, 1 + 3 * 2),  # plus any three
    ],
)
def test_income_per_good(building: str, tile_set: str, goods: dict[str, int], amount: int) -> None:
    """§3 C / §8: Rum Distillery +$3 per sugar owned and (extended tile set) Mint +$2 per
    gold and silver owned, paid with the income."""
    state = game(players=2, tile_set=tile_set)
    give_building(state, 1, building)
    for name, count in goods.items():
        state.goods[1][good(state, name)] = count
    start_placement(state, {0: {"colonist": 1}})
    events = place_in_order(state, [(0, "colonist", "warfare")])
    assert money_events(events, "income") == [(1, amount)]


def _buy(
    state: GameState, building: str, regions: tuple[str, ...] = (), turn: int = 1
) -> list[Event]:
    """Seat 0, with $30, puts a colonist on Capital Buildings in ``turn`` with ``building``
    the only one on display, and buys it."""
    offer_only(state, building)
    state.money[0] = 30
    start_placement(state, {0: {"colonist": 1}}, turn=turn)
    place_in_order(state, [(0, "colonist", "buildings")])
    assert pending(state) == (Decision(0, "buy"),)
    assert BuyBuilding(0, building, regions) in legal_commands(state, 0)
    return decide_into(state, BuyBuilding(0, building, regions))


def test_conquest_of_the_inca_empire_pays_twenty_once() -> None:
    """§8 Conquest of the Inca Empire: $20 once, on purchase (price $10 in age I)."""
    state = game(players=2)
    events = _buy(state, "conquest_of_the_inca_empire")
    assert money_events(events, "building") == [(0, -10)]
    assert money_events(events, "conquest_of_the_inca_empire") == [(0, 20)]
    assert state.money[0] == 30 - 10 + 20
    # Not again in later turns.
    assert money_events(run(state, until="turn_started"), "conquest_of_the_inca_empire") == []


def test_new_world_cartography_discovers_a_region() -> None:
    """§8 New World Cartography: 4 VP and a free discovery of a chosen undiscovered region: a
    free colonist there, the token and its $, no plunder."""
    state = game(players=2)
    token = token_with(state, natives=5)
    money, _, _, vp = state.rules.tokens[token]
    put_token(state, "peru", token)
    events = _buy(state, "new_world_cartography", ("peru",))
    peru = region(state, "peru")
    assert [d["region"] for d in events_of(events, "free_discovery")] == ["peru"]
    assert money_events(events, "discovery") == [(0, money)]
    assert state.discovered[peru] and state.units[peru] == [1, 0]
    assert state.tokens_won[0] == [token]
    row = score(state)[0]
    assert (row["discoveries"], row["buildings"]) == (vp, 4)


def test_indian_allies_only_where_the_owner_has_a_unit() -> None:
    """§8 Indian Allies: immediately 2 free soldiers into one region where the owner has a
    unit (and nowhere else); price $14 in age II."""
    state = game(players=2)
    discover(state, "florida")
    set_units(state, "florida", 0, 1)
    events = _buy(state, "indian_allies", ("florida",), turn=4)
    assert money_events(events, "building") == [(0, -14)]
    florida = region(state, "florida")
    assert (state.units[florida][0], state.soldiers[florida][0]) == (3, 2)
    # The first to 3 units in Florida takes its tobacco.
    assert state.goods[0][good(state, "tobacco")] == 1


def test_indian_allies_refuses_a_region_without_own_unit() -> None:
    """§8 Indian Allies: the region must hold one of the owner's units."""
    state = game(players=2)
    discover(state, "florida")
    set_units(state, "florida", 0, 1)
    set_units(state, "caribbean", 1, 1)
    offer_only(state, "indian_allies")
    state.money[0] = 30
    start_placement(state, {0: {"colonist": 1}}, turn=4)
    place_in_order(state, [(0, "colonist", "buildings")])
    offers = [c for c in legal_commands(state, 0) if isinstance(c, BuyBuilding)]
    assert offers == [BuyBuilding(0, "indian_allies", ("florida",))]
    assert _violation(state, BuyBuilding(0, "indian_allies", ("caribbean",))) == "illegal_region"


def test_trade_goods_taken_in_space_order() -> None:
    """§5 Trade Goods: in space order each occupant takes one of the revealed goods."""
    state = game(players=2)
    state.goods_revealed = [good(state, g) for g in ("gold", "fish", "fish", "rice")]
    start_placement(state, {0: {"colonist": 1}, 1: {"colonist": 1}}, order=[1, 0])
    place_in_order(state, [(1, "colonist", "goods"), (0, "colonist", "goods")])
    assert pending(state) == (Decision(1, "take_good"),)
    assert set(legal_commands(state, 1)) == {TakeGood(1, g) for g in ("gold", "fish", "rice")}
    decide_into(state, TakeGood(1, "gold"))
    assert pending(state) == (Decision(0, "take_good"),)
    assert set(legal_commands(state, 0)) == {TakeGood(0, g) for g in ("fish", "rice")}
    assert _violation(state, TakeGood(0, "gold")) == "illegal"
    decide_into(state, TakeGood(0, "fish"))
    assert state.goods[1][good(state, "gold")] == 1
    assert state.goods[0][good(state, "fish")] == 1


@pytest.mark.parametrize(("navy", "per_ship"), [(4, 4), (3, 3)])
def test_navy_edition_option(navy: int, per_ship: int) -> None:
    """§8 edition option: Navy is worth 4 VP per ship (appendix) or 3 (section VIII text)."""
    state = game(players=2, navy_vp_per_ship=navy)
    give_building(state, 0, "navy")
    state.ships[0] = 2
    assert score(state)[0]["buildings"] == 2 * per_ship


# --- Setup and the end-of-turn steps (§2, §3 F-G) --------------------------------------------


@pytest.mark.parametrize("players", [2, 5])
def test_setup(players: int) -> None:
    """§2: $10 each plus compensation by starting position (+$0, +$1, ...); 8 tokens face
    down (not on the Caribbean) and 8 unused; 4 goods revealed beside the 9 on the map;
    5 Age I buildings; one ship in Merchant Shipping; 5 colonists each."""
    state = game(players=players, seed=11)
    for position, seat in enumerate(state.order):
        assert state.money[seat] == 10 + position
    caribbean = region(state, "caribbean")
    assert state.token_on[caribbean] == -1
    on_map = [t for t in state.token_on if t >= 0]
    assert len(on_map) == 8 and len(state.unused_tokens) == 8
    assert sorted(on_map + state.unused_tokens) == list(range(16))
    assert len(state.goods_revealed) == 4
    assert len(state.goods_pile) + len(state.goods_revealed) + 9 == 46
    assert len(state.revealed_buildings) == 5
    assert {state.rules.buildings[b].age for b in state.revealed_buildings} == {1}
    assert (state.ship_in_box, state.ship_supply) == (1, 7)
    assert state.avail == [[5, 0, 0, 0, 0]] * players


def test_new_ship_and_new_goods_at_the_end_of_the_turn() -> None:
    """§3 F-G: a ship is added to an empty Merchant Shipping box; the goods left unchosen are
    shuffled back and 4 are revealed again."""
    state = game(players=2)
    start_placement(state, {0: {"colonist": 1}, 1: {"colonist": 1}})
    events = run(state, until="turn_started")  # both units go to Merchant Shipping
    assert len(events_of(events, "ship_taken")) == 1
    assert len(events_of(events, "ship_added")) == 1
    assert (state.ship_in_box, state.ship_supply) == (1, 6)
    assert len(state.goods_revealed) == 4
    assert len(state.goods_pile) == 46 - 9 - 4

    # Nobody in Merchant Shipping: the ship stays, none is added.
    start_placement(state, {0: {"colonist": 1}})
    events = place_in_order(state, [(0, "colonist", "warfare")])
    assert events_of(events, "ship_added") == []
    assert (state.ship_in_box, state.ship_supply) == (1, 6)


# --- Capital buildings refresh (§3 E) --------------------------------------------------------


def test_buildings_refill_to_five_within_an_age() -> None:
    """§3 E: at the end of a turn the display is refilled to 5 from the current age's pile;
    the buildings still on display stay."""
    state = game(players=2)
    kept = state.revealed_buildings[2:]
    for b in state.revealed_buildings[:2]:
        give_building(state, 0, state.rules.buildings[b].id)
    pile = len(state.piles[0])
    start_placement(state, {0: {"colonist": 1}})
    events = place_in_order(state, [(0, "colonist", "warfare")])
    (refresh,) = events_of(events, "buildings_revealed")
    assert (refresh["age"], refresh["removed"], len(refresh["revealed"])) == (1, [], 2)
    assert len(state.revealed_buildings) == 5
    assert all(b in state.revealed_buildings for b in kept)
    assert all(state.rules.buildings[b].age == 1 for b in state.revealed_buildings)
    assert len(state.piles[0]) == pile - 2


@pytest.mark.parametrize(("turn", "next_age"), [(3, 2), (6, 3)])
def test_buildings_replaced_at_the_end_of_an_age(turn: int, next_age: int) -> None:
    """§3 E: at the end of turns 3 and 6 the unbought buildings of the ending age are removed
    and 5 of the next age are revealed."""
    state = game(players=2)
    if next_age == 3:  # the age II display, as it would be during turn 6
        state.revealed_buildings = state.piles[1][-5:]
        del state.piles[1][-5:]
    old = [state.rules.buildings[b].id for b in state.revealed_buildings]
    start_placement(state, {0: {"colonist": 1}}, turn=turn)
    events = place_in_order(state, [(0, "colonist", "warfare")])
    (refresh,) = events_of(events, "buildings_revealed")
    assert refresh["age"] == next_age and refresh["removed"] == old
    assert len(state.revealed_buildings) == 5
    assert {state.rules.buildings[b].age for b in state.revealed_buildings} == {next_age}
    assert state.turn == turn + 1
    price = state.rules.ruleset.building_prices[next_age - 1]
    assert price == {2: 14, 3: 20}[next_age]


def test_building_price_follows_the_age() -> None:
    """§8: a building costs $10 in age I, $14 in age II; buying pays the age price."""
    state = game(players=2)
    state.revealed_buildings = state.piles[1][-5:]
    del state.piles[1][-5:]
    state.money[0] = 30
    start_placement(state, {0: {"colonist": 1}}, turn=4)
    place_in_order(state, [(0, "colonist", "buildings")])
    assert pending(state) == (Decision(0, "buy"),)
    offer = next(c for c in legal_commands(state, 0) if isinstance(c, BuyBuilding))
    events = decide_into(state, offer)
    assert money_events(events, "building") == [(0, -14)]


# --- End of the game (§3 J, §7) --------------------------------------------------------------


def test_game_ends_after_turn_eight_with_tie_break_places() -> None:
    """§3 J / §7: after turn 8 the game ends with the final scores. All four seats total 6 VP:
    seat 1 scored its 6 at the end of turn 8 and wins the first tie-break; the others are
    ranked by money (seat 2 $20, seat 0 $15, seat 3 $10)."""
    state = game(players=4)
    state.colony_vp = [[6, 0, 0], [0, 0, 0], [0, 6, 0], [0, 6, 0]]
    set_units(state, "caribbean", 1, 3)
    state.money = [15, 5, 20, 10]
    start_placement(state, {0: {"colonist": 1}}, turn=8)
    events = place_in_order(state, [(0, "colonist", "warfare")])

    (scored,) = events_of(events, "colonies_scored")
    assert scored["age"] == 3 and scored["vp"] == [0, 6, 0, 0]
    (ended,) = events_of(events, "game_ended")
    assert events[-1].type == "game_ended"
    assert events_of(events, "turn_started") == []
    assert state.phase == "over" and pending(state) == ()
    assert ended["scores"] == score(state)
    rows = {row["seat"]: row for row in ended["scores"]}
    assert [rows[s]["total"] for s in range(4)] == [6, 6, 6, 6]
    assert [rows[s]["place"] for s in range(4)] == [3, 1, 2, 4]
    assert _violation(state, Pass(0)) == "game_over"


def test_final_ties_broken_by_goods_then_shared() -> None:
    """§7 ties: equal VP, equal turn-8 colony VP and equal money → most goods; still tied is a
    shared place."""
    state = game(players=4)
    state.colony_vp = [[2, 0, 0]] * 4
    state.money = [7, 7, 7, 7]
    state.goods[0][good(state, "gold")] = 1
    state.goods[0][good(state, "fish")] = 1
    state.goods[1][good(state, "fish")] = 1
    rows = score(state)
    assert [row["total"] for row in rows] == [2, 2, 2, 2]
    assert [row["place"] for row in rows] == [1, 2, 3, 3]


def test_final_score_adds_every_source() -> None:
    """§7: final score = colony VP (three scorings) + discovery VP + building VP (fixed and
    conditional) + economy VP (this turn's income from sets only)."""
    state = game(players=2)
    state.colony_vp[0] = [6, 2, 2]
    state.tokens_won[0] = [token_with(state, natives=5)]
    state.cards_won[0] = [card_on_top(state, "China")]
    give_building(state, 0, "taxation")  # 2 VP (its $10 is not economy)
    give_building(state, 0, "glory")  # 2 VP per region with a unit
    set_units(state, "caribbean", 0, 1)
    set_units(state, "florida", 0, 2)
    state.goods[0][good(state, "sugar")] = 4  # economy 6
    row = score(state)[0]
    token_vp = state.rules.tokens[state.tokens_won[0][0]][3]
    card_vp = state.rules.cards[state.cards_won[0][0]][3]
    assert row["colonies"] == 10
    assert row["discoveries"] == token_vp + card_vp
    assert row["buildings"] == 2 + 2 * 2
    assert row["economy"] == set_income(state.goods[0], 0) == 6
    assert row["total"] == 10 + token_vp + card_vp + 6 + 6


def test_economy_vp_is_the_set_income_of_turn_eight() -> None:
    """§6: economy VP at the end = the income from sets in turn 8 (phase C). A good received
    after that income, in phase D (here West Indies Company's third sugar), is kept but does
    not count: two sugar and a fish paid $1 in turn 8, so economy is 1, not the 3 that
    three sugar would pay."""
    state = game(players=2)
    give_building(state, 0, "west_indies_company")
    sugar = good(state, "sugar")
    state.goods[0][sugar] = 2
    state.goods[0][good(state, "fish")] = 1
    state.goods_pile.remove(sugar)
    state.goods_pile.append(sugar)  # the top of the pile: what West Indies Company gives
    start_placement(state, {0: {"colonist": 1}}, turn=8)
    events = place_in_order(state, [(0, "colonist", "warfare")])

    assert money_events(events, "income") == [(0, 1)]
    (taken,) = [d for d in events_of(events, "good_taken") if d["seat"] == 0]
    assert taken["good"] == "sugar" and state.goods[0][sugar] == 3
    (ended,) = events_of(events, "game_ended")
    assert state.phase == "over" and ended["scores"] == score(state)
    assert score(state)[0]["economy"] == 1
    assert set_income(state.goods[0], 0) == 3  # what the goods held at the end would pay


def test_a_snapshot_from_before_the_turn_income_was_kept_still_loads() -> None:
    """Snapshots stored before the state kept what the sets paid load with what the goods
    held pay (as economy VP was computed then)."""
    state = game(players=2)
    state.goods[0][good(state, "sugar")] = 3
    snapshot = state.to_snapshot()
    del snapshot["income_sets"]
    restored = GameState.from_snapshot(state.rules, snapshot)
    assert restored.income_sets == [3, 0]


# --- Income: the best partition (§6) ---------------------------------------------------------

SHIP = -1


def _best_partition(items: tuple[int, ...]) -> int:
    """Brute force over every way to group items (good kinds, SHIP) into sets."""
    if len(items) < 3:
        return 0
    first, rest = items[0], items[1:]
    best = _best_partition(rest)  # the first item in no set
    for size in (2, 3):
        for chosen in combinations(range(len(rest)), size):
            group = (first, *(rest[i] for i in chosen))
            goods = [g for g in group if g != SHIP]
            if len(group) - len(goods) > 1:
                continue
            same = len(set(goods)) == 1
            value = (6 if same else 0) if len(group) == 4 else (3 if same else 1)
            if value:
                left = tuple(x for i, x in enumerate(rest) if i not in chosen)
                best = max(best, value + _best_partition(left))
    return best


def test_income_is_the_best_partition() -> None:
    """§6 Decision: the engine pays the partition with the highest income (each item in at
    most one set, at most one ship per set), checked against a brute force."""
    rnd = Random(6)
    kinds = len(rules().goods)
    for _ in range(150):
        goods = [0] * kinds
        for _ in range(rnd.randint(0, 7)):
            goods[rnd.randrange(4)] += 1
        ships = rnd.randint(0, 3)
        items = tuple(g for g, c in enumerate(goods) for _ in range(c)) + (SHIP,) * ships
        assert set_income(goods, ships) == _best_partition(items), (goods, ships)


# --- Violations ------------------------------------------------------------------------------


def test_out_of_turn() -> None:
    """A seat that has nothing to decide is refused with "out_of_turn"."""
    state = game(players=3)
    (d,) = pending(state)
    other = (d.seat + 1) % 3
    assert legal_commands(state, other) == []
    assert _violation(state, Place(other, "colonist", "shipping")) == "out_of_turn"


def test_not_enough_money_for_a_war() -> None:
    """§5 Warfare: a war costs $10; with $5 it is refused with "not_enough_money"."""
    state = game(players=2)
    set_units(state, "caribbean", 0, 1, soldiers=1)
    set_units(state, "caribbean", 1, 1)
    state.money[0] = 5
    start_placement(state, {0: {"colonist": 1}})
    place_in_order(state, [(0, "colonist", "warfare")])
    assert pending(state) == (Decision(0, "conflict"),)
    assert War(0, 1) not in legal_commands(state, 0)
    assert _violation(state, War(0, 1)) == "not_enough_money"


def test_two_units_in_initiative() -> None:
    """§3 A: a player may never put two units in Initiative ("illegal_space")."""
    state = game(players=2)
    start_placement(state, {0: {"colonist": 2}, 1: {"colonist": 2}}, order=[0, 1])
    place_in_order(state, [(0, "colonist", "initiative"), (1, "colonist", "shipping")])
    assert Place(0, "colonist", "initiative") not in legal_commands(state, 0)
    assert _violation(state, Place(0, "colonist", "initiative")) == "illegal_space"
    decide_into(state, Place(0, "colonist", "shipping"))
    # The other player still may.
    assert Place(1, "colonist", "initiative") in legal_commands(state, 1)


@pytest.mark.parametrize("command", [Land(0, "caribbean"), Pass(0), Bid(0, 1)])
def test_wrong_command(command: Command) -> None:
    """A command that does not answer the pending decision (placing) is "wrong_command"."""
    state = game(players=2)
    start_placement(state, {0: {"colonist": 1}})
    assert _violation(state, command) == "wrong_command"


# --- University (§8, edition option) ---------------------------------------------------------


@pytest.mark.parametrize(
    ("edition", "dock_after"), [("to_front", [0, 1, 2]), ("one_forward", [1, 0, 2])]
)
def test_university_moves_a_unit_once_per_game(edition: str, dock_after: list[int]) -> None:
    """§8 University: once per game, as a free action in the owner's placement turn, move one
    of your units to the first space of the Colonist Dock (or one space forward in the
    Italian edition option). The dock then resolves in the new order."""
    state = game(players=3, university=edition)
    give_building(state, 0, "university")
    units = {seat: {"colonist": 2} for seat in range(3)}
    start_placement(state, units, order=[1, 2, 0])
    place_in_order(state, [(1, "colonist", "dock"), (2, "colonist", "dock")])
    # Not before the owner has a unit to move (the turn-order move is available though).
    assert UseUniversity(0, "dock", 2) not in legal_commands(state, 0)
    place_in_order(state, [(0, "colonist", "dock"), (1, "colonist", "shipping")])
    place_in_order(state, [(2, "colonist", "shipping")])
    assert UseUniversity(0, "dock", 2) in legal_commands(state, 0)

    events = decide_into(state, UseUniversity(0, "dock", 2))
    assert [e.type for e in events] == ["university_used"]
    assert [seat for seat, _ in state.dock] == dock_after
    assert state.university_used[0]
    # A free action: it is still seat 0's placement turn, and the University is spent.
    assert pending(state) == (Decision(0, "place"),)
    assert not any(isinstance(c, UseUniversity) for c in legal_commands(state, 0))
    assert _violation(state, UseUniversity(0, "turn_order")) == "illegal"

    # Only the Caribbean is discovered: the landings are automatic, in the new dock order.
    events = decide_into(state, Place(0, "colonist", "shipping"))
    assert [d["seat"] for d in events_of(events, "landed")] == dock_after


@pytest.mark.parametrize(
    ("edition", "order_after"), [("to_front", [0, 1, 2]), ("one_forward", [1, 0, 2])]
)
def test_university_moves_the_owner_in_turn_order(edition: str, order_after: list[int]) -> None:
    """§8 University: the owner may instead move itself to the first space of Turn Order (or
    one space forward); with nobody on Initiative the new order carries into the next turn."""
    state = game(players=3, university=edition)
    give_building(state, 0, "university")
    start_placement(state, {seat: {"colonist": 2} for seat in range(3)}, order=[1, 2, 0])
    place_in_order(state, [(1, "colonist", "shipping"), (2, "colonist", "shipping")])
    decide_into(state, UseUniversity(0, "turn_order"))
    assert state.order == order_after
    assert pending(state) == (Decision(0, "place"),)
    run(state, until="turn_started")
    assert state.order == order_after


# --- Refusals say what is wrong, never Python's None -----------------------------------------


def _reason(state: GameState, command: Command) -> str:
    """The human reason ``command`` is refused with (the state left unchanged)."""
    before = state.state_hash()
    with pytest.raises(RuleViolation) as refused:
        decide(state, command)
    assert state.state_hash() == before
    return refused.value.reason


def test_a_specialists_placement_must_name_one_of_its_spaces() -> None:
    """§5 Specialists: each occupant takes the specialist of its space (captain, merchant,
    missionary, soldier) or trains: a unit sent there without a space, or to a space the box
    does not have, is refused with the spaces it does have."""
    state = game(players=2)
    start_placement(state, {0: {"colonist": 1}})
    spaces = "one of captain, merchant, missionary, soldier, training"
    assert _reason(state, Place(0, "colonist", "specialists")) == (
        f"the Specialists box needs a space: {spaces}"
    )
    assert _reason(state, Place(0, "colonist", "specialists", "admiral")) == (
        f"the Specialists box has no space 'admiral': {spaces}"
    )


def test_an_expedition_to_the_deck_while_a_region_is_undiscovered_names_the_deck() -> None:
    """§5 Discovery: only once every region is discovered do expeditions draw the top card
    of the discovery deck (a target of no region); before that, the refusal names the deck
    and the regions that can be targeted."""
    state = game(players=2)
    token = token_with(state, natives=2)
    put_token(state, "florida", token)
    start_placement(state, {0: {"colonist": 1}})
    place_in_order(state, [(0, "colonist", "discovery")])
    reason = _reason(state, Expedition(0, 1, 0, 0, None))
    assert reason.startswith("no expedition can target the discovery deck now; it can target ")
    assert "'florida'" in reason and "None" not in reason


def test_a_command_without_a_seat_or_an_optional_field_reads_plainly() -> None:
    """§3 I / §8 University: a command naming no seat is refused as such; a University move
    of oneself in the turn order (no space) by a player without the University is refused
    naming the move, with no empty field shown."""
    state = game(players=2)
    start_placement(state, {0: {"colonist": 1}})
    no_seat = Place(None, "colonist", "shipping")  # type: ignore[arg-type]  # as from the wire
    assert _reason(state, no_seat) == "the command names no seat: this game has seats 0 to 1"
    assert _reason(state, Place(5, "colonist", "shipping")) == (
        "there is no seat 5: this game has seats 0 to 1"
    )
    assert _reason(state, UseUniversity(0, "turn_order")) == (
        "university (box 'turn_order') is not allowed here"
    )


@pytest.mark.parametrize("starting_order", ["random", "auction"])
def test_turn_positions_are_the_first_turns_order(starting_order: str) -> None:
    """Rules §2 (starting order, drawn or bid for): each seat's turn position is its place in
    the first turn's order, whatever the turns after it reorder."""
    game = api.get("age_of_discovery")
    rules = game.rules("standard", {"starting_order": starting_order})
    played = api.play_random_game(game, rules, 4, 5)
    first = next(e for e in played.events if e.type == "turn_order").data["order"]
    assert game.turn_positions(played.state) == [first.index(seat) for seat in range(4)]
    later = [e.data["order"] for e in played.events if e.type == "turn_order"]
    assert any(order != first for order in later), "no turn reordered the seats"


def test_a_log_and_a_snapshot_in_the_old_shape_still_read() -> None:
    """A log stored before games had names (envelope schema 1, ``game_created`` without
    ``game``) and a snapshot from before the starting order was kept: the log replays to the
    same state, each of its events matches its declared class once read, and the snapshot
    restores (its starting order unknown, the turn positions are the seats' own)."""
    game = api.get()
    played = api.play_random_game(game, game.rules("standard"), 3, 4)
    stored = []
    for version, e in enumerate(played.events, start=1):
        data = {k: v for k, v in e.data.items() if e.type != "game_created" or k != "game"}
        raw = {"game_id": "g", "version": version, "type": e.type, "data": data}
        stored.append({**raw, "secret": e.secret, "schema_version": 1})
    events = [to_event(load_event(raw)) for raw in stored]
    assert game.state_hash(game.replay(events)) == game.state_hash(played.state)
    assert [api.check_event(e, game.event_types()) for e in events] == [None] * len(events)
    snapshot = json.loads(json.dumps(game.snapshot(played.state)))
    del snapshot["start_order"]
    restored = game.restore(snapshot)
    assert restored.start_order == [] and game.turn_positions(restored) == [0, 1, 2]


def test_an_expedition_to_a_discovery_card_is_a_declared_event() -> None:
    """Rules §5, Discovery: "once every region is discovered, expeditions draw the top
    discovery card instead". Such an expedition's event names no region and shows the card
    (here California, natives 4, failed with strength 2, from the game the protocol's
    property test drew: 4 players, seed 71200); it validates against the declared
    ``expedition`` class, as a region's does, and a mix of the two shapes does not."""
    spec = Spec(
        name="age_of_discovery",
        ruleset="standard",
        options=(
            ("factory_income", 25),
            ("navy_vp_per_ship", 4),
            ("starting_order", "random"),
            ("tile_set", "standard"),
            ("university", "to_front"),
        ),
        players=4,
        seed=71200,
        play_seed=1,
    )
    play = spec.start().finish()
    types = play.game.event_types()
    expeditions = [e for e in play.log if e.type == "expedition"]
    (card,) = [e for e in expeditions if e.data["region"] is None]
    assert card.data["card"]["name"] == "California" and not card.data["success"]
    assert all(api.check_event(e, types) is None for e in expeditions)
    region = next(e for e in expeditions if e.data["region"] is not None)
    for mixed in (
        {**card.data, "token": region.data["token"]},  # a card and a token
        {k: v for k, v in region.data.items() if k != "token"},  # a region, nothing shown
        {**region.data, "region": None},  # no region, a token
    ):
        assert api.check_event(Event("expedition", mixed), types) is not None
