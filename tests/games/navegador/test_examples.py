"""The worked examples ("Esempio") of the Italian quick intro (../shared/seeds/001_…) and the
examples of navegador.md, replayed on the engine through its public API.

Where the intro leaves a number to its figures, the situation is set up as navegador.md's
board data reconstructs it; each docstring states the rulebook situation.
"""

from __future__ import annotations

import pytest

from shared.games.api import RuleViolation
from shared.games.navegador import State, legal_commands, pending, score, view
from shared.games.navegador.commands import (
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
from shared.games.navegador.scoring import column_values

from .situations import (
    RULES,
    at_action,
    at_turn,
    explore,
    game,
    good,
    of_type,
    play,
    region,
    ships,
)

SAILING, WORKERS, MARKET, COLONY, PRIVILEGE, SHIPS, MARKET_2, BUILDINGS = range(8)


# --- Selezione azione: the rondel ------------------------------------------------------------


def test_rondel_costs_from_sailing() -> None:
    """Esempio (SELEZIONE AZIONE): the stone on SAILING may move to WORKERS, MARKET or
    COLONY for free; PRIVILEGE costs 1 ship, SHIPS 2 ships, and so on (each field beyond
    three costs a ship); repeating SAILING takes 8 fields and 5 ships."""
    s = at_turn(game(), 0, SAILING)
    ships(s, 0, portugal=7)
    costs = {f: cost for f, _, cost in RULES.rondel_moves(s.stone[0], s.on_board(0))}
    assert costs == {
        WORKERS: 0,
        MARKET: 0,
        COLONY: 0,
        PRIVILEGE: 1,
        SHIPS: 2,
        MARKET_2: 3,
        BUILDINGS: 4,
        SAILING: 5,
    }
    events = play(s, Rondel(0, SHIPS))
    # all ships lie in Portugal: both are paid from there without asking
    assert [e["region"] for e in of_type(events, "ship_paid")] == ["portugal", "portugal"]
    assert s.ships[0][region("portugal")] == 5 and s.stage == "ships"


def test_rondel_moves_need_the_ships_they_cost() -> None:
    """A move beyond 3 fields costs one ship per extra field, from anywhere on the board:
    with 1 ship on the board the stone goes at most 4 fields; the player chooses which ship
    when they lie in several regions."""
    s = at_turn(game(), 0, SAILING)
    ships(s, 0, guine=1)
    assert {c.field for c in legal_commands(s, 0) if isinstance(c, Rondel)} == {1, 2, 3, 4}
    with pytest.raises(RuleViolation) as refused:
        play(s, Rondel(0, SHIPS))
    assert refused.value.code == "not_enough_ships"
    ships(s, 0, guine=1, bahia=1)
    play(s, Rondel(0, SHIPS))
    assert pending(s)[0].kind == "pay" and s.owed == 2
    assert legal_commands(s, 0) == [PayShip(0, "guine"), PayShip(0, "bahia")]
    play(s, PayShip(0, "bahia"))  # then only Guiné holds ships: paid without asking
    assert s.on_board(0) == 0 and s.stage == "ships"


def test_market_is_printed_twice() -> None:
    """navegador.md §3: Market is printed twice, so Market to Market is 4 fields: 1 ship."""
    s = at_turn(game(), 0, MARKET)
    ships(s, 0, portugal=2)
    assert (MARKET_2, 4, 1) in RULES.rondel_moves(MARKET, 2)
    play(s, Rondel(0, MARKET_2))
    assert s.ships[0][region("portugal")] == 1


def test_first_placement_is_free() -> None:
    """The first placement chooses any field for free."""
    s = game()
    seat = s.current
    assert {c.field for c in legal_commands(s, seat) if isinstance(c, Rondel)} == set(range(8))
    play(s, Rondel(seat, BUILDINGS))
    assert s.on_board(seat) == 2


# --- Workers and ships -----------------------------------------------------------------------


def test_workers_two_churches() -> None:
    """Esempio (LAVORATORI): with 2 churches, 2 new workers cost 50 each: pays 100 and the
    Lisboa marker moves 2 to the right. 3 new workers in phase II cost 300 (2x50+200)."""
    s = at_action(game(), 0, "workers")
    s.churches[0], s.money[0], s.workers[0] = 2, 500, 3
    play(s, Recruit(0, 2))
    assert (s.money[0], s.workers[0]) == (400, 5)
    s = at_action(game(), 0, "workers")
    s.churches[0], s.money[0], s.workers[0], s.phase = 2, 500, 3, 2
    events = play(s, Recruit(0, 3))
    assert of_type(events, "workers_recruited")[0]["cost"] == 300
    assert (s.money[0], s.workers[0]) == (200, 6)


def test_workers_beyond_nine_are_sold() -> None:
    """Esempio (LAVORATORI): 8 workers and 3 churches: pays 150 for 3 workers, the marker
    reaches 9 and the bank pays 200 for the other 2. The 150 must be payable first."""
    s = at_action(game(), 0, "workers")
    s.churches[0], s.workers[0], s.money[0] = 3, 8, 150
    play(s, Recruit(0, 3))
    assert (s.workers[0], s.money[0]) == (9, 200)
    s = at_action(game(), 0, "workers")
    s.churches[0], s.workers[0], s.money[0] = 3, 8, 149
    with pytest.raises(RuleViolation) as refused:
        play(s, Recruit(0, 3))
    assert refused.value.code == "not_enough_money"


def test_ships_follow_the_workers_prices() -> None:
    """NAVI: as many ships as shipyards at 50, more at 100 per phase; new ships go to
    Portugal; with all 7 ships on the board shipyard ships are paid 50 and sold for 100."""
    s = at_action(game(), 0, "ships")
    s.shipyards[0], s.money[0] = 2, 400
    ships(s, 0, guine=2)
    play(s, BuyShips(0, 3))  # 2 x 50 + 100 (phase I)
    assert (s.money[0], s.ships[0][region("portugal")]) == (200, 3)
    s = at_action(game(), 0, "ships")
    s.shipyards[0], s.money[0] = 2, 100
    ships(s, 0, guine=7)
    assert legal_commands(s, 0) == [BuyShips(0, 1), BuyShips(0, 2), Pass(0)]
    play(s, BuyShips(0, 2))
    assert (s.money[0], s.on_board(0)) == (200, 7)


# --- Sailing and exploring -------------------------------------------------------------------


def test_sailing_ranges_in_phase_two() -> None:
    """Esempio (NAVIGAZIONE): phase II, Red has 3 ships in Portugal and 1 in Guiné. The
    Guiné ship sails to Cabo da Boa Esperança, the only one that can get there (2 borders
    at most); 2 ships from Portugal sail to Angola and 1 to Bahia."""
    s = at_action(game(), 0, "sailing")
    s.phase = 2
    explore(s, "guine", "bahia", "rio_de_janeiro", "angola", "cabo_da_boa_esperanca")
    ships(s, 0, portugal=3, guine=1)
    with pytest.raises(RuleViolation) as refused:
        play(s, Sail(0, "portugal", "cabo_da_boa_esperanca"))
    assert refused.value.code == "too_far"
    play(
        s,
        Sail(0, "guine", "cabo_da_boa_esperanca"),
        Sail(0, "portugal", "angola"),
        Sail(0, "portugal", "angola"),
        Sail(0, "portugal", "bahia"),
    )
    assert s.ships[0][region("angola")] == 2 and s.ships[0][region("cabo_da_boa_esperanca")] == 1
    assert s.ships[0][region("bahia")] == 1 and s.stage != "sailing"  # nothing left to sail


def test_exploring_angola() -> None:
    """Esempio (Esploratore): Red sails from Guiné and from Rio de Janeiro into the
    unexplored Angola beside them. He loses 1 ship, takes the explorer disc, turns Angola's
    colonies face up and, the cheapest being 70, receives 70 from the bank."""
    s = at_action(game(), 0, "sailing")
    explore(s, "guine", "bahia", "rio_de_janeiro")
    ships(s, 0, guine=1, rio_de_janeiro=1)
    s.stacks[region("angola")] = [70, 110, 140]
    money = s.money[0]
    events = play(s, Explore(0, "angola", ("guine", "rio_de_janeiro")))
    (explored,) = of_type(events, "explored")
    assert explored["tokens"] == [70, 110, 140] and explored["bonus"] == 70
    assert s.money[0] == money + 70 and s.explorers[0] == 1
    assert s.ships[0][region("angola")] == 1 and s.on_board(0) == 1 and s.in_supply(0) == 6
    assert view(s, 1)["regions"][region("angola")]["tokens"] == [70, 110, 140]


def test_a_single_ship_never_enters_an_unexplored_region() -> None:
    """Esploratore: an unexplored region cannot be reached by a single ship; 2 are needed
    (one is lost), 3 with the double-loss token (Nagasaki; Macau with 2-3 players)."""
    s = at_action(game(), 0, "sailing")
    ships(s, 0, portugal=1)
    with pytest.raises(RuleViolation) as refused:
        play(s, Sail(0, "portugal", "guine"))
    assert refused.value.code == "unexplored"
    with pytest.raises(RuleViolation) as refused:
        play(s, Explore(0, "guine", ("portugal",)))
    assert refused.value.code == "party_size"
    for players, party in ((3, 3), (4, 2)):
        s = at_action(game(players), 0, "sailing")
        explore(s, "guine", "angola", "cabo_da_boa_esperanca", "mocambique", "goa", "ceilao")
        explore(s, "malaca", "timor")
        ships(s, 0, timor=3)
        (option,) = [c for c in legal_commands(s, 0) if isinstance(c, Explore)]
        assert option.region == "macau" and len(option.origins) == party
        events = play(s, option)
        assert of_type(events, "explored")[0]["lost"] == party - 1


def test_one_exploration_per_sailing_action() -> None:
    """One new sea region per Sailing action at most."""
    s = at_action(game(), 0, "sailing")
    ships(s, 0, portugal=2, guine=0)
    explore(s, "guine")
    ships(s, 0, guine=4)
    play(s, Explore(0, "bahia", ("guine", "guine")))
    assert not [c for c in legal_commands(s, 0) if isinstance(c, Explore)]
    with pytest.raises(RuleViolation) as refused:
        play(s, Explore(0, "angola", ("guine", "guine")))
    assert refused.value.code == "one_exploration"


def test_phase_two_starts_from_the_next_turn() -> None:
    """FASI: exploring Cabo da Boa Esperança starts phase II from the next turn; until then
    ships keep the old range. The gallery is set to the new phase's count (4 players: 2)."""
    s = at_action(game(4), 0, "sailing")
    explore(s, "guine", "angola")
    ships(s, 0, angola=2, portugal=1)
    play(s, Explore(0, "cabo_da_boa_esperanca", ("angola", "angola")))
    assert s.phase == 1 and s.next_phase == 2
    assert Sail(0, "portugal", "angola") not in legal_commands(s, 0)  # still 1 border
    events = play(s, Pass(0))
    assert [e.type for e in events][-2:] == ["phase_started", "turn_started"]
    assert s.phase == 2 and s.gallery == [2, 2, 2, 2, 2]


def test_gallery_resets_by_player_count() -> None:
    """FASI (figure H): with 2 players each phase starts with 1 privilege of each type; with
    5 players phase II with 2 and phase III with 3."""
    for players, phase, count in ((2, 2, 1), (2, 3, 1), (5, 2, 2), (5, 3, 3)):
        s = at_action(game(players), 0, "privilege")
        s.gallery = [0, 1, 0, 3, 1]
        s.next_phase = phase
        s.workers[0] = 2  # nothing to take: the action ends, the next turn starts
        play(s, Pass(0)) if s.stage == "privilege" else None
        assert s.phase == phase and s.gallery == [count] * 5, (players, phase)


# --- Colony ----------------------------------------------------------------------------------


def test_colonies_in_guine_and_bahia() -> None:
    """Esempio (COLONIA): Red has 6 workers, 2 ships in Bahia and 1 in Guiné. He can found
    only 2 colonies, Guiné (80) and Bahia (100), paying 180. He could not found one in Rio
    de Janeiro (no ship there); with only 3 workers, only 1 colony."""
    s = at_action(game(), 0, "colony")
    explore(s, "guine", "bahia", "rio_de_janeiro")
    ships(s, 0, bahia=2, guine=1)
    s.workers[0], s.money[0] = 6, 500
    s.stacks[region("guine")] = [80, 120]
    s.stacks[region("bahia")] = [100]
    s.stacks[region("rio_de_janeiro")] = [40, 50]
    assert Found(0, "rio_de_janeiro") not in legal_commands(s, 0)
    with pytest.raises(RuleViolation) as refused:
        play(s, Found(0, "rio_de_janeiro"))
    assert refused.value.code == "no_ship"
    play(s, Found(0, "guine"), Found(0, "bahia"))
    assert s.money[0] == 320 and s.colonies[0][good("gold")] == [80]
    assert s.colonies[0][good("sugar")] == [100] and s.stage != "colony"  # nothing left
    s = at_action(game(), 0, "colony")
    explore(s, "guine")
    ships(s, 0, guine=1)
    s.workers[0], s.money[0] = 3, 500
    s.stacks[region("guine")] = [80, 120]
    play(s, Found(0, "guine"))
    assert s.stage != "colony"  # the second colony would need 4 workers


def test_two_ships_in_guine_found_three_colonies() -> None:
    """Esempio (COLONIA), continued: with 2 ships in Guiné Red could found 3 colonies if he
    could afford them; the cheapest token of a region is always taken."""
    s = at_action(game(), 0, "colony")
    explore(s, "guine", "bahia")
    ships(s, 0, bahia=2, guine=2)
    s.workers[0], s.money[0] = 6, 500
    s.stacks[region("guine")] = [120, 80]
    s.stacks[region("guine")].sort()
    s.stacks[region("bahia")] = [100]
    events = play(s, Found(0, "guine"), Found(0, "guine"), Found(0, "bahia"))
    assert [e["price"] for e in of_type(events, "colony_founded")] == [80, 120, 100]


# --- Buildings -------------------------------------------------------------------------------


def test_buildings_with_seven_workers() -> None:
    """Esempio (EDIFICI, figure C): 7 workers. A gold factory and a shipyard cost 220
    (70+150); 2 gold factories, or a gold and a spice factory, 170; 2 shipyards need 8
    workers; a church (5 workers) leaves room for no second building."""

    def fresh() -> State:
        s = at_action(game(), 0, "buildings")
        s.workers[0], s.money[0] = 7, 1000
        return s

    s = fresh()
    play(s, Build(0, "gold_factory"), Build(0, "shipyard"))
    assert s.money[0] == 1000 - 220
    s = fresh()
    play(s, Build(0, "gold_factory"), Build(0, "gold_factory"))
    assert s.money[0] == 1000 - 170
    s = fresh()
    play(s, Build(0, "gold_factory"), Build(0, "spice_factory"))
    assert s.money[0] == 1000 - 170
    s = fresh()
    play(s, Build(0, "shipyard"))
    with pytest.raises(RuleViolation) as refused:
        play(s, Build(0, "shipyard"))
    assert refused.value.code == "not_enough_workers"
    s = fresh()
    play(s, Build(0, "church"))
    assert s.stage != "buildings"  # 2 workers left: no building fits


# --- Market ----------------------------------------------------------------------------------


def test_selling_three_gold() -> None:
    """Esempio (Vendere): 3 gold from colonies sold at the shown 50: the bank pays 150 and
    the marker drops three rows to 30. Selling 5 would pay 250 and the marker would stop at
    the bottom row, where the next player gets only 30 per gold."""
    s = at_action(game(), 0, "market")
    s.market[good("gold")] = 5  # row 6: gold 50
    s.colonies[0][good("gold")] = [50, 60, 70, 80, 90]
    money = s.money[0]
    play(s, Sell(0, "gold", 3))
    assert s.money[0] == money + 150 and RULES.prices[s.market[good("gold")]][good("gold")] == 30
    s = at_action(game(), 0, "market")
    s.market[good("gold")] = 5
    s.colonies[0][good("gold")] = [50, 60, 70, 80, 90]
    play(s, Sell(0, "gold", 5))
    assert s.money[0] == money + 250 and s.market[good("gold")] == 9


def test_selling_and_processing() -> None:
    """Esempio (figures E and F): 4 colonies and 4 factories. He sells 2 gold (50+50) and
    1 spice (80); gold and spice can then not be processed, so his spice factory is idle
    and the orange one can only process sugar: 3 sugar at 30 each, 90. The bank pays 270.
    Selling 1 sugar instead of processing would have paid 40 less."""
    s = at_action(game(), 0, "market")
    s.market = [3, 5, 1]  # sugar 50 / factory 30, gold 50, spice 80
    s.colonies[0] = [[40], [50, 60], [60]]
    s.factories[0] = [2, 0, 1]
    money = s.money[0]
    play(s, Sell(0, "gold", 2), Sell(0, "spice", 1))
    assert [c for c in legal_commands(s, 0) if isinstance(c, Process)] == [
        Process(0, "sugar", n) for n in (1, 2, 3)
    ]
    play(s, Process(0, "sugar", 3))
    assert s.money[0] == money + 270
    assert s.market == [0, 7, 2]  # sugar up 3, gold down 2, spice down 1
    s = at_action(game(), 0, "market")
    s.market = [3, 5, 1]
    s.colonies[0] = [[40], [50, 60], [60]]
    s.factories[0] = [2, 0, 1]
    play(s, Sell(0, "gold", 2), Sell(0, "spice", 1), Sell(0, "sugar", 1))
    assert s.money[0] == money + 230


def test_processing_pays_the_rows_factory_income() -> None:
    """Figure D: a spice price of 60 gives 40 per spice factory; the marker then rises one
    row per unit and stops at the top."""
    s = at_action(game(), 0, "market")
    s.market[good("spice")] = 4  # row 5: spice 60
    s.factories[0][good("spice")] = 1
    money = s.money[0]
    events = play(s, Process(0, "spice", 2))  # its factory and the orange one
    assert of_type(events, "goods_processed")[0]["wildcard"] is True
    assert s.money[0] == money + 80 and s.market[good("spice")] == 2


def test_never_sell_and_process_one_good() -> None:
    """Vendita e lavorazione: a good is either sold or processed in one action, not both."""
    s = at_action(game(), 0, "market")
    s.colonies[0][good("sugar")] = [40, 50]
    s.factories[0][good("sugar")] = 1
    play(s, Sell(0, "sugar", 1))
    with pytest.raises(RuleViolation) as refused:
        play(s, Process(0, "sugar", 1))
    assert refused.value.code == "already_traded"


# --- Privilege -------------------------------------------------------------------------------


def test_privilege_payouts() -> None:
    """Esempio (PRIVILEGIO): every type is in the gallery. The player pays 1 worker and
    takes a church privilege; holding one already, it goes to the second position, bonus
    40: for 2 churches 80. An explorer privilege would have paid 5x20=100, a shipyard one
    50; the first column pays 30 per colony, the second 20 per factory."""

    def fresh() -> State:
        s = at_action(game(), 0, "privilege")
        s.workers[0], s.churches[0], s.shipyards[0], s.explorers[0] = 5, 2, 1, 5
        s.privileges[0][4] = 1
        s.colonies[0] = [[40], [50], [60]]
        s.factories[0] = [1, 0, 0]  # with the orange one: 2 factories
        return s

    for column, income in (
        ("church", 80),
        ("explorer", 100),
        ("shipyard", 50),
        ("colony", 90),
        ("factory", 40),
    ):
        s = fresh()
        money = s.money[0]
        play(s, TakePrivilege(0, column))
        assert s.money[0] - money == income, column
        assert s.workers[0] == 4


def test_a_privilege_needs_a_third_worker() -> None:
    """PRIVILEGIO: with only 2 workers no privilege can be taken (never below 2)."""
    s = at_action(game(), 0, "privilege")
    s.workers[0] = 3
    s.gallery = [0, 0, 0, 0, 1]
    assert legal_commands(s, 0) == [TakePrivilege(0, "church"), Pass(0)]
    s.workers[0] = 2
    with pytest.raises(RuleViolation) as refused:
        play(s, TakePrivilege(0, "church"))
    assert refused.value.code == "not_enough_workers"


# --- The Navegador card ----------------------------------------------------------------------


def test_card_goes_to_the_last_player_and_not_in_the_first_round() -> None:
    """INIZIO: after the starting player is chosen, the last player (to their right) gets
    the card; it cannot be used in the first turn. After the holder's first placement the
    orange marker lies on that field."""
    s = game(4, seed=3)
    holder = s.holder
    assert holder == (s.start - 1) % 4
    while s.current != holder:
        play(s, Rondel(s.current, SAILING)) if s.stage == "turn" else play(s, Pass(s.current))
    assert UseCard(holder) not in legal_commands(s, holder)
    play(s, Rondel(holder, COLONY))
    assert s.marker == COLONY


def test_card_used_passes_right() -> None:
    """NAVEGADOR: the holder sails once more before their turn; the card then passes to
    the player on their right, and the orange ship goes to that player's field."""
    s = at_turn(game(4), 2, WORKERS)
    s.holder, s.marker = 2, WORKERS
    s.stone[1] = BUILDINGS
    ships(s, 2, portugal=2)
    play(s, UseCard(2), Explore(2, "guine", ("portugal", "portugal")))
    assert s.explorers[2] == 1
    if s.stage == "sailing":
        play(s, Pass(2))
    assert (s.holder, s.marker, s.stage, s.current) == (1, BUILDINGS, "turn", 2)
    assert UseCard(2) not in legal_commands(s, 2)


def test_card_and_sailing_explore_twice() -> None:
    """NAVEGADOR: with the card and a regular Sailing two explorers can be taken before the
    next player's turn."""
    s = at_turn(game(4), 2, BUILDINGS)
    s.holder, s.marker = 2, BUILDINGS
    explore(s, "guine")
    ships(s, 2, guine=4)
    play(s, UseCard(2), Explore(2, "bahia", ("guine", "guine")))
    play(s, Pass(2)) if s.stage == "sailing" else None
    play(s, Rondel(2, SAILING), Explore(2, "angola", ("guine", "guine")))
    assert s.explorers[2] == 2


def test_card_lapses_when_the_holder_passes_the_marker() -> None:
    """NAVEGADOR (figure I): if the holder enters or passes the orange ship's field without
    having used the card, it passes to their right and the orange ship moves to that
    player's field."""
    s = at_turn(game(4), 2, WORKERS)
    s.holder, s.marker = 2, COLONY
    s.stone[1] = SHIPS
    ships(s, 2, portugal=2)
    play(s, Rondel(2, MARKET))  # short of the marker: still held
    assert s.holder == 2
    s = at_turn(game(4), 2, WORKERS)
    s.holder, s.marker = 2, COLONY
    s.stone[1] = SHIPS
    ships(s, 2, portugal=2)
    events = play(s, Rondel(2, PRIVILEGE))  # passes Colony
    assert of_type(events, "card_passed")[0]["reason"] == "lapsed"
    assert (s.holder, s.marker) == (1, SHIPS)


def test_phase_started_by_the_card_counts_from_the_regular_turn() -> None:
    """NAVEGADOR: a phase entered by the card's Sailing takes effect with the regular turn."""
    s = at_turn(game(4), 2, WORKERS)
    s.holder, s.marker = 2, WORKERS
    explore(s, "guine", "angola")
    ships(s, 2, angola=2, portugal=1)
    play(s, UseCard(2), Explore(2, "cabo_da_boa_esperanca", ("angola", "angola")))
    assert s.phase == 1
    play(s, Pass(2)) if s.stage == "sailing" else None
    assert s.phase == 2 and s.current == 2 and s.stage == "turn"


# --- End and scoring -------------------------------------------------------------------------


def _finish_turns(s: State) -> int:
    """Play every remaining turn passing everything; the number of turns played."""
    turns = 0
    while pending(s):
        d = pending(s)[0]
        if d.kind == "turn":
            turns += 1
            moves = [c for c in legal_commands(s, d.seat) if isinstance(c, Rondel)]
            play(s, moves[0])
        elif d.kind == "pay":
            play(s, legal_commands(s, d.seat)[0])
        else:
            play(s, Pass(d.seat))
    return turns


def test_nagasaki_triggers_one_final_turn_each() -> None:
    """FINE DEL GIOCO: after Nagasaki is explored every player, the one who triggered the
    end included, takes one final turn, then the game ends."""
    s = at_action(game(4), 1, "sailing")
    s.explored = (1 << len(RULES.regions)) - 1 - (1 << region("nagasaki"))
    ships(s, 1, macau=3)
    events = play(s, Explore(1, "nagasaki", ("macau", "macau", "macau")))
    assert of_type(events, "end_triggered")[0]["reason"] == "explored"
    assert _finish_turns(s) == 4 and s.stage == "over"


def test_nagasaki_with_the_card() -> None:
    """FINE DEL GIOCO: a player exploring Nagasaki with the card still takes the regular
    turn, and only then every player, himself included, takes a final turn."""
    s = at_turn(game(4), 1, WORKERS)
    s.holder, s.marker = 1, WORKERS
    s.explored = (1 << len(RULES.regions)) - 1 - (1 << region("nagasaki"))
    ships(s, 1, macau=3)
    play(s, UseCard(1), Explore(1, "nagasaki", ("macau", "macau", "macau")))
    assert s.current == 1 and s.stage == "turn"
    assert _finish_turns(s) == 1 + 4


def test_last_building_triggers_the_end() -> None:
    """FINE DEL GIOCO: taking the last building triggers the end."""
    s = at_action(game(4), 0, "buildings")
    s.left = [0, 0, 1, 0, 0]
    s.workers[0], s.money[0] = 9, 1000
    events = play(s, Build(0, "spice_factory"))
    assert of_type(events, "end_triggered")[0]["reason"] == "buildings"
    assert _finish_turns(s) == 4


def test_figure_a_values_per_achievement() -> None:
    """SOMMARIO (figure A): the sheet shows 1 VP per colony, 2 per factory, 5 per explorer,
    7 per shipyard and 3 per church: base 1, 1, 2, 3, 3 plus 0, 1, 3, 2 and 0 privileges
    (the King's privilege goes where it scores most: the orange factory being the only
    achievement, to the factories, which it raises by 1)."""
    s = game(4)
    s.privileges[0] = [0, 1, 3, 2, 0]
    s.factories[0] = [0, 0, 0]
    s.explorers[0], s.shipyards[0], s.churches[0] = 0, 0, 0
    assert column_values(s, 0) == [1, 2 + 1, 5, 7, 3]


def test_scoring_example() -> None:
    """PUNTEGGIO (figure L) and its scoring example: each colony counts 4 VP, each factory
    2, each explorer 5, each shipyard 7 and each church 5; the player has 3 ships at sea and
    5 workers (the intro's text stops there, so the rest is chosen: 4 colonies, 3 factories
    with the orange one, 2 explorers, 2 shipyards, 1 church and 430 Cr). Before scoring
    the King's privilege is placed on a free position without its coin: +2 per shipyard
    or church, +1 in the other columns; here it scores most on the shipyards."""
    s = game(4)
    s.privileges[0] = [3, 1, 3, 2, 1]  # 4, 2, 5, 7, 5 per achievement
    s.colonies[0] = [[40, 50], [60], [70]]
    s.factories[0] = [1, 1, 0]
    s.explorers[0], s.shipyards[0], s.churches[0] = 2, 2, 1
    ships(s, 0, guine=2, bahia=1)
    s.workers[0], s.money[0] = 5, 430
    row = score(s)[0]
    assert row["king"] == "shipyard"
    assert (row["workers"], row["ships"], row["money"]) == (5, 3, 2)
    assert (row["colony_vp"], row["factory_vp"], row["explorer_vp"]) == (16, 6, 10)
    assert (row["shipyard_vp"], row["church_vp"]) == (2 * 9, 5)
    assert row["total"] == 5 + 3 + 2 + 16 + 6 + 10 + 18 + 5


def test_ties_go_to_the_card() -> None:
    """PUNTEGGIO: a tie is won by the player holding the card, else by the tied player who
    would receive it next (the card passes to the right)."""
    s = game(4)
    for seat in range(4):
        s.money[seat], s.workers[seat] = 0, 3
        ships(s, seat, portugal=2)
    s.holder = 2
    places = {row["seat"]: row["place"] for row in score(s)}
    assert places == {2: 1, 1: 2, 0: 3, 3: 4}
    s.workers[3] = 4
    assert score(s)[3]["place"] == 1


def test_the_map_fits_the_rules_examples() -> None:
    """navegador.md §2, checks against the rules' examples: Portugal to Angola and to Bahia
    take 2 borders; Guiné to Cabo 2; Portugal to Cabo 3; Guiné and Rio de Janeiro both
    border Angola (all explored)."""
    every = (1 << len(RULES.regions)) - 1
    portugal = RULES.distances(every, region("portugal"))
    assert portugal[region("angola")] == portugal[region("bahia")] == 2
    assert portugal[region("cabo_da_boa_esperanca")] == 3
    assert RULES.distances(every, region("guine"))[region("cabo_da_boa_esperanca")] == 2
    angola = RULES.adjacent[region("angola")]
    assert region("guine") in angola and region("rio_de_janeiro") in angola
