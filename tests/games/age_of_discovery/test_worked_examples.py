"""The worked examples of the rulebook (French edition, ../shared/seeds/004_…), replayed on the
engine through its public API.

Seats follow the nation order of the ruleset: seat 0 red (England), 1 blue (France),
2 yellow (Spain), 3 green (Portugal), 4 orange (Holland).
"""

from __future__ import annotations

import pytest

from shared.games.age_of_discovery import (
    Battle,
    Casualties,
    Decision,
    GameState,
    Place,
    RuleViolation,
    War,
    decide,
    decide_into,
    legal_commands,
    pending,
    view,
)
from shared.games.age_of_discovery.income import set_income
from shared.games.age_of_discovery.scoring import colony_vp

from .scenarios import (
    discover,
    events_of,
    game,
    give_building,
    money_events,
    place_in_order,
    region,
    rules,
    run,
    set_units,
    start_placement,
)

# --- 1. Turn order (section III I) -----------------------------------------------------------


def _initiative_in_seat_order(state: GameState, d: Decision) -> Place | None:
    """Turn 1: each seat goes to Initiative as soon as every lower seat is there, so that the
    order of turn 2 is 0, 1, 2, ... whatever the random starting order was."""
    if d.kind == "place" and d.seat == len(state.initiative):
        return Place(d.seat, "colonist", "initiative")
    return None


@pytest.mark.parametrize(
    ("players", "red", "blue", "green", "orange", "others"),
    [
        # 4 players: the example's four nations are played by seats 0-3 (red, blue, and
        # seats 2 and 3 in the roles of Green and Orange, whose ruleset colours there are
        # yellow and green).
        (4, 0, 1, 2, 3, []),
        # 5 players: the real nations (green = seat 3, orange = seat 4), yellow (seat 2) being
        # a fifth player who stays off Initiative like Red and Blue.
        (5, 0, 1, 3, 4, [2]),
    ],
)
def test_turn_order_example(
    players: int, red: int, blue: int, green: int, orange: int, others: list[int]
) -> None:
    """§III I: in turn 2 the order is Red, Blue, Green, Orange; Green puts a colonist on
    Initiative space 1 and Orange on space 2; the order of turn 3 is Green, Orange, Red, Blue
    (Red and Blue move back but keep their relative order)."""
    state = game(players=players, seed=7)
    # Turn 1, played for real: every seat on Initiative in seat order.
    run(state, _initiative_in_seat_order, until="turn_started")
    assert state.turn == 2
    assert state.order == [red, blue, *others, green, orange]
    if players == 5:
        colours = [p["color"] for p in view(state)["players"]]
        assert [colours[s] for s in (red, blue, green, orange)] == [
            "red",
            "blue",
            "green",
            "orange",
        ]

    def green_then_orange(s: GameState, d: Decision) -> Place | None:
        if d.kind == "place" and d.seat in (green, orange) and d.seat not in s.initiative:
            return Place(d.seat, "colonist", "initiative")
        return None

    events = run(state, green_then_orange, until="turn_started")
    assert money_events(events, "initiative") == [(green, 1), (orange, 2)]
    assert state.turn == 3
    assert state.order == [green, orange, red, blue, *others]
    assert pending(state) == (Decision(green, "place"),)


# --- 2. The battle (section V, Warfare) ------------------------------------------------------


def test_battle_example() -> None:
    """§V Warfare, battle example: Sean (2 soldiers, 3 colonists in Canada) declares a battle
    against Angelo (1 soldier, 4 colonists in Canada). Sean's two soldiers kill two units: he
    chooses Angelo's soldier and a colonist; Angelo chooses to kill one of Sean's soldiers."""
    sean, angelo = 0, 1
    state = game(players=2)
    discover(state, "canada")
    set_units(state, "canada", sean, 5, soldiers=2)
    set_units(state, "canada", angelo, 5, soldiers=1)
    start_placement(state, {sean: {"colonist": 1}})
    place_in_order(state, [(sean, "colonist", "warfare")])

    assert pending(state) == (Decision(sean, "conflict"),)
    assert Battle(sean, "canada", angelo) in legal_commands(state, sean)
    decide_into(state, Battle(sean, "canada", angelo))

    # Both sides choose their casualties at once: how many enemy soldiers their kills take.
    assert set(pending(state)) == {Decision(sean, "casualties"), Decision(angelo, "casualties")}
    assert set(legal_commands(state, sean)) == {Casualties(sean, 0), Casualties(sean, 1)}
    assert set(legal_commands(state, angelo)) == {Casualties(angelo, 0), Casualties(angelo, 1)}

    first = decide_into(state, Casualties(sean, 1))
    # Sean's choice stays his own until the battle resolves; losses are simultaneous.
    (chosen,) = [e for e in first if e.type == "casualties_chosen"]
    assert chosen.visibility == sean
    assert pending(state) == (Decision(angelo, "casualties"),)
    assert view(state, angelo)["regions"][region(state, "canada")]["units"] == [5, 5]

    events = decide_into(state, Casualties(angelo, 1))
    (resolved,) = events_of(events, "battle_resolved")
    losses = {seat: (colonists, soldiers) for seat, colonists, soldiers in resolved["losses"]}
    assert losses == {sean: (0, 1), angelo: (1, 1)}
    canada = region(state, "canada")
    assert (state.units[canada][sean], state.soldiers[canada][sean]) == (4, 1)
    assert (state.units[canada][angelo], state.soldiers[canada][angelo]) == (3, 0)


# --- 3. The war (section V, Warfare) ---------------------------------------------------------


def test_war_example() -> None:
    """§V Warfare, war example: Sean declares war on Angelo and pays $10. Sean has soldiers
    and colonists in New Granada, New Spain and New England, only colonists in Florida and
    Canada; Angelo has colonists in New Granada, Canada and New Spain and soldiers in Florida.
    Battles happen in New Granada, New Spain and Florida; none in Canada (no soldier there)."""
    sean, angelo = 0, 1
    state = game(players=2)
    discover(state, "new_granada", "new_spain", "new_england", "florida", "canada")
    for name in ("new_granada", "new_spain", "new_england"):
        set_units(state, name, sean, 3, soldiers=1)
    set_units(state, "florida", sean, 2)
    set_units(state, "canada", sean, 2)
    set_units(state, "new_granada", angelo, 2)
    set_units(state, "canada", angelo, 2)
    set_units(state, "new_spain", angelo, 2)
    set_units(state, "florida", angelo, 1, soldiers=1)
    state.money[sean] = 15
    start_placement(state, {sean: {"colonist": 1}})
    place_in_order(state, [(sean, "colonist", "warfare")])

    assert War(sean, angelo) in legal_commands(state, sean)
    events = run(
        state,
        lambda s, d: War(sean, angelo) if d.kind == "conflict" else None,
        until="turn_started",
    )
    (conflict,) = events_of(events, "conflict")
    assert conflict["kind"] == "war"
    assert sorted(conflict["regions"]) == ["florida", "new_granada", "new_spain"]
    assert money_events(events, "war") == [(sean, -10)]
    assert state.money[sean] == 15 - 10
    # One battle per region, fought one after the other.
    resolved = events_of(events, "battle_resolved")
    assert [b["region"] for b in resolved] == conflict["regions"]
    # Sean's soldiers each kill one of Angelo's colonists; Angelo's soldier kills in Florida.
    assert state.units[region(state, "new_granada")] == [3, 1]
    assert state.units[region(state, "new_spain")] == [3, 1]
    assert state.units[region(state, "florida")] == [1, 1]
    assert state.units[region(state, "canada")] == [2, 2]
    assert state.units[region(state, "new_england")] == [3, 0]


# --- 4. Income sets (section VI) -------------------------------------------------------------


def _goods(**counts: int) -> list[int]:
    r = rules()
    out = [0] * len(r.goods)
    for name, count in counts.items():
        out[r.good_index[name]] = count
    return out


@pytest.mark.parametrize(
    ("goods", "ships", "expected"),
    [
        (_goods(indigo=1, silver=1, tobacco=1), 0, 1),  # the rulebook's "any three"
        (_goods(indigo=2), 1, 3),  # Indigo, Indigo and a ship: three identical
        (_goods(sugar=4), 0, 6),  # four sugar
        (_goods(sugar=3), 1, 6),  # a ship completes four identical
        (_goods(indigo=1), 2, 0),  # one ship per set: two ships and an indigo are no set
        (_goods(indigo=1, sugar=1), 2, 1),  # two goods and two ships: one set, one ship idle
        (_goods(indigo=2, sugar=2), 2, 6),  # two sets of three identical, one ship each
        (_goods(indigo=1, silver=1), 0, 0),  # two goods are no set
        (_goods(sugar=7), 0, 9),  # four identical + three identical
        (_goods(sugar=4, gold=1, fish=1), 1, 7),  # each good in one set only
    ],
)
def test_income_sets(goods: list[int], ships: int, expected: int) -> None:
    """§VI: any three goods $1, three identical $3 (Indigo, Indigo, ship), four identical $6
    (four sugar); a ship is a wildcard, one per set."""
    assert set_income(goods, ships) == expected


def test_income_sets_paid_in_the_income_phase() -> None:
    """§III C / §VI: the sets of the example pay at the end of the turn, as money with reason
    "income": Indigo+Silver+Tobacco $1, Indigo+Indigo+ship $3, four sugar $6, and two ships
    with one indigo nothing."""
    state = game(players=4)
    state.goods[0] = _goods(indigo=1, silver=1, tobacco=1)
    state.goods[1] = _goods(indigo=2)
    state.ships[1] = 1
    state.goods[2] = _goods(sugar=4)
    state.goods[3] = _goods(indigo=1)
    state.ships[3] = 2
    before = state.money[:]
    start_placement(state, {0: {"colonist": 1}})
    # Warfare with nobody on the map: an automatic pass, no money, no ship.
    events = place_in_order(state, [(0, "colonist", "warfare")])
    assert any(e.type == "turn_started" for e in events)
    assert money_events(events, "income") == [(0, 1), (1, 3), (2, 6)]
    assert [after - b for after, b in zip(state.money, before, strict=True)] == [1, 3, 6, 0]


# --- 5. Merchant Shipping tie (section V) ----------------------------------------------------


@pytest.mark.parametrize(
    ("order", "winner"),
    [([1, 0, 2], 1), ([0, 1, 2], 0), ([2, 1, 0], 2)],
)
def test_merchant_shipping_tie(order: list[int], winner: int) -> None:
    """§V Merchant Shipping: the highest value takes the ship (colonist 1, captain 2,
    merchant 2); on equal values the player earlier in turn order takes it. Here a merchant
    (seat 0), a captain (seat 1) and two colonists (seat 2) are all worth 2."""
    state = game(players=3)
    start_placement(
        state,
        {0: {"merchant": 1}, 1: {"captain": 1}, 2: {"colonist": 2}},
        order=order,
    )
    events = run(state, until="turn_started")
    (taken,) = events_of(events, "ship_taken")
    assert taken["strength"] == [2, 2, 2]
    assert taken["seat"] == winner
    assert state.ships == [1 if seat == winner else 0 for seat in range(3)]


def test_merchant_shipping_captain_beats_a_colonist() -> None:
    """§V Merchant Shipping: a captain counts 2, so it beats a lone colonist even when the
    colonist's owner is first in turn order."""
    state = game(players=2)
    start_placement(state, {0: {"colonist": 1}, 1: {"captain": 1}}, order=[0, 1])
    events = run(state, until="turn_started")
    (taken,) = events_of(events, "ship_taken")
    assert (taken["seat"], taken["strength"]) == (1, [1, 2])


# --- 6. Colonist Dock spaces (section II) ----------------------------------------------------


@pytest.mark.parametrize("players", [2, 3, 4, 5])
def test_dock_spaces(players: int) -> None:
    """§II: the Colonist Dock has 2 x players - 1 numbered spaces (9 with five players);
    the next placement there is refused and the dock is no longer offered."""
    state = game(players=players, seed=players)
    placed = []
    while True:
        (d,) = pending(state)
        command = Place(d.seat, "colonist", "dock")
        if command not in legal_commands(state, d.seat):
            with pytest.raises(RuleViolation) as refused:
                decide(state, command)
            assert refused.value.code == "box_full"
            break
        decide_into(state, command)
        placed.append(d.seat)
    assert len(placed) == 2 * players - 1
    # Filled left to right, in the order the units were placed.
    assert [seat for seat, _ in state.dock] == placed


# --- 7. Colony scoring ties (section VIII) ---------------------------------------------------


@pytest.mark.parametrize(
    ("units", "expected"),
    [
        ([3, 0, 0, 0], [6, 0, 0, 0]),  # a lone player with 3 units scores 6, no second
        ([0, 0, 5, 0], [0, 0, 6, 0]),
        ([4, 2, 0, 0], [6, 2, 0, 0]),  # most 6, second 2
        ([1, 5, 0, 2], [0, 6, 0, 2]),  # second counts even below 3 units
        ([3, 3, 1, 0], [2, 2, 0, 0]),  # two tied first: 2 each, no second
        ([3, 3, 3, 0], [0, 0, 0, 0]),  # three tied first: nobody
        ([4, 4, 4, 4], [0, 0, 0, 0]),
        ([4, 2, 2, 0], [6, 0, 0, 0]),  # two tied second score 0
        ([5, 1, 1, 1], [6, 0, 0, 0]),
        ([2, 2, 1, 0], [0, 0, 0, 0]),  # nobody with 3 units: the region does not score
        ([0, 0, 0, 0], [0, 0, 0, 0]),
    ],
)
def test_colony_scoring_ties(units: list[int], expected: list[int]) -> None:
    """§VIII colony scoring: at least 3 units to score; most 6, second 2; two tied first 2
    each and no second; three tied first nobody; tied second 0; a lone player 6."""
    assert colony_vp(units, rules()) == expected


def test_colony_scoring_at_the_end_of_age_one() -> None:
    """§VIII: colonies score at the end of turn 3 (age I), region by region, summed per
    player and recorded as that age's colony VP."""
    state = game(players=4)
    discover(state, "florida", "new_spain", "canada", "peru")
    layout = {
        "caribbean": [3, 1, 0, 0],  # seat 0 first (6), seat 1 second (2)
        "florida": [2, 2, 4, 0],  # seat 2 first (6); seats 0 and 1 tied second (0)
        "new_spain": [3, 3, 0, 1],  # seats 0 and 1 tied first (2 each), no second
        "canada": [2, 2, 2, 2],  # nobody has 3 units
        "peru": [3, 3, 3, 0],  # three tied first: nobody
    }
    for name, units in layout.items():
        for seat, count in enumerate(units):
            set_units(state, name, seat, count)
    start_placement(state, {0: {"colonist": 1}}, turn=3)
    events = run(state, until="turn_started")

    (scored,) = events_of(events, "colonies_scored")
    assert scored["age"] == 1
    assert scored["vp"] == [6 + 0 + 2, 2 + 0 + 2, 6, 0]
    assert scored["regions"] == {
        "caribbean": [6, 2, 0, 0],
        "florida": [0, 0, 6, 0],
        "new_spain": [2, 2, 0, 0],
    }
    assert [vp[0] for vp in state.colony_vp] == [8, 4, 6, 0]
    assert state.turn == 4


# --- 8. End of turn (section III H) ----------------------------------------------------------


def test_end_of_turn_units_example() -> None:
    """§III H: at the end of the turn the red player receives 5 free colonists, a missionary
    (red owns Monastery) and a captain (red had a colonist on the Captain space of
    Specialists); blue, with neither, receives the 5 colonists only."""
    red, blue = 0, 1
    state = game(players=2)
    give_building(state, red, "monastery")
    start_placement(state, {red: {"colonist": 1}, blue: {"colonist": 1}}, order=[red, blue])
    events = place_in_order(
        state, [(red, "colonist", "specialists", "captain"), (blue, "colonist", "warfare")]
    )
    granted = {d["seat"]: d["units"] for d in events_of(events, "units_granted")}
    assert granted[red] == {"colonist": 5, "captain": 1, "missionary": 1}
    assert granted[blue] == {"colonist": 5}
    assert state.turn == 2
    assert view(state)["players"][red]["available"] == {
        "colonist": 5,
        "captain": 1,
        "missionary": 1,
    }
    # They are placeable in turn 2: red, first in order, may place the missionary.
    assert Place(red, "missionary", "dock") in legal_commands(state, red)
