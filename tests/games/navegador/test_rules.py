"""Navegador rule by rule: each violation code, the ruleset file's validation, hidden
information, results and facts. Each test names the rule (navegador.md section) it checks."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from shared.games import api
from shared.games.api import RulesetError, RuleViolation
from shared.games.navegador import (
    State,
    decide,
    determinize,
    legal_commands,
    load_ruleset,
    view,
)
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
from shared.games.navegador.ruleset import parse_ruleset

from .situations import RULES, at_action, at_turn, explore, game, ships

STANDARD = Path(__file__).parents[3] / "shared/games/navegador/rulesets/standard.toml"


def sailing() -> State:
    s = at_action(game(), 0, "sailing")
    explore(s, "guine")
    ships(s, 0, portugal=2, guine=1)
    return s


def turn() -> State:
    s = at_turn(game(), 0, 0)
    ships(s, 0, portugal=1)
    return s


def market() -> State:
    s = at_action(game(), 0, "market")
    s.colonies[0][0] = [40]
    return s


def workers() -> State:
    s = at_action(game(), 0, "workers")
    s.money[0] = 40
    return s


# (situation, command, code): each refused command leaves the state unchanged.
VIOLATIONS: list[tuple[Callable[[], State], object, str]] = [
    (turn, Rondel(1, 2), "out_of_turn"),
    (turn, Rondel(7, 2), "unknown_seat"),
    (turn, Pass(0), "wrong_command"),
    (turn, Rondel(0, 8), "unknown_field"),
    (turn, Rondel(0, 5), "not_enough_ships"),
    (turn, UseCard(0), "not_card_holder"),
    (sailing, Sail(0, "atlantis", "guine"), "unknown_region"),
    (sailing, Sail(0, "bahia", "guine"), "no_ship"),
    (sailing, Sail(0, "guine", "guine"), "same_region"),
    (sailing, Sail(0, "guine", "bahia"), "unexplored"),
    (sailing, Explore(0, "guine", ("portugal", "portugal")), "explored"),
    (sailing, Explore(0, "bahia", ("guine",)), "party_size"),
    (sailing, Explore(0, "bahia", ("guine", "portugal")), "origins_order"),
    (sailing, Explore(0, "bahia", ("guine", "guine")), "no_ship"),
    (sailing, Explore(0, "bahia", ("portugal", "guine")), "too_far"),
    (market, Sell(0, "tea", 1), "unknown_good"),
    (market, Sell(0, "sugar", 2), "bad_count"),
    (market, Process(0, "gold", 2), "bad_count"),
    (workers, Recruit(0, 0), "bad_count"),
    (workers, Recruit(0, 1), "not_enough_money"),
]


@pytest.mark.parametrize(("situation", "command", "code"), VIOLATIONS)
def test_violation_codes(situation: Callable[[], State], command: object, code: str) -> None:
    """Every refusal carries its precise code and changes nothing."""
    s = situation()
    before = s.state_hash()
    with pytest.raises(RuleViolation) as refused:
        decide(s, command)  # type: ignore[arg-type]
    assert refused.value.code == code
    assert s.state_hash() == before


def test_card_not_usable_in_the_first_round() -> None:
    """§7: the card is not used in the first round (the holder's stone is off the rondel)."""
    s = at_turn(game(), 0, None)
    s.holder = 0
    with pytest.raises(RuleViolation) as refused:
        decide(s, UseCard(0))
    assert refused.value.code == "card_not_usable_yet"


def test_pay_ship_needs_a_ship_there() -> None:
    """§3: a ship paid for the rondel is one of the player's ships on the board."""
    s = at_turn(game(), 0, 0)
    ships(s, 0, portugal=1, guine=1)
    decide_into_all(s, Rondel(0, 4))
    with pytest.raises(RuleViolation) as refused:
        decide(s, PayShip(0, "bahia"))
    assert refused.value.code == "no_ship"


def decide_into_all(s: State, *commands: object) -> None:
    from shared.games.navegador import decide_into

    for c in commands:
        decide_into(s, c)  # type: ignore[arg-type]


def test_colony_codes() -> None:
    """§4 Colony: a colony needs a token in an explored region, a ship, 2 workers, money."""
    s = at_action(game(), 0, "colony")
    explore(s, "guine", "bahia")
    ships(s, 0, guine=1, bahia=1)
    s.stacks[RULES.regions.index("guine")] = [80]
    s.stacks[RULES.regions.index("bahia")] = [100]
    s.money[0] = 90
    for command, code in (
        (Found(0, "angola"), "no_colony"),
        (Found(0, "portugal"), "no_colony"),
        (Found(0, "bahia"), "not_enough_money"),
    ):
        with pytest.raises(RuleViolation) as refused:
            decide(s, command)
        assert refused.value.code == code
    s.workers[0] = 1
    with pytest.raises(RuleViolation) as refused:
        decide(s, Found(0, "guine"))
    assert refused.value.code == "not_enough_workers"


def test_building_codes() -> None:
    """§4 Buildings: known tracks only, one left, enough workers and money."""
    s = at_action(game(), 0, "buildings")
    s.money[0], s.workers[0] = 65, 9
    s.left[1] = 0
    for command, code in (
        (Build(0, "palace"), "unknown_building"),
        (Build(0, "gold_factory"), "sold_out"),
        (Build(0, "spice_factory"), "not_enough_money"),
    ):
        with pytest.raises(RuleViolation) as refused:
            decide(s, command)
        assert refused.value.code == code
    s.workers[0] = 2
    with pytest.raises(RuleViolation) as refused:
        decide(s, Build(0, "sugar_factory"))
    assert refused.value.code == "not_enough_workers"


def test_privilege_codes() -> None:
    """§4 Privilege: a known type, in the gallery, at most 3 per type per player."""
    s = at_action(game(), 0, "privilege")
    s.workers[0] = 5
    s.gallery = [0, 1, 1, 1, 1]
    s.privileges[0] = [0, 3, 0, 0, 0]
    for command, code in (
        (TakePrivilege(0, "king"), "unknown_column"),
        (TakePrivilege(0, "colony"), "gallery_empty"),
        (TakePrivilege(0, "factory"), "column_full"),
    ):
        with pytest.raises(RuleViolation) as refused:
            decide(s, command)
        assert refused.value.code == code


def test_ships_cap_at_seven() -> None:
    """§4 Ships: at 7 ships on the board further ships (not from a shipyard) cannot come."""
    s = at_action(game(), 0, "ships")
    ships(s, 0, portugal=7)
    s.money[0] = 1000
    assert legal_commands(s, 0) == [BuyShips(0, 1), Pass(0)]
    with pytest.raises(RuleViolation) as refused:
        decide(s, BuyShips(0, 2))
    assert refused.value.code == "bad_count"


def test_no_ship_passes_through_an_unexplored_region() -> None:
    """§4 Sailing (Decision): a path runs through explored regions only."""
    s = at_action(game(), 0, "sailing")
    s.phase = 3
    explore(s, "guine", "rio_de_janeiro")
    ships(s, 0, guine=1)
    # Guiné - Bahia (unexplored) - Rio: blocked; Guiné - Angola (unexplored) - Rio: blocked
    with pytest.raises(RuleViolation) as refused:
        decide(s, Sail(0, "guine", "rio_de_janeiro"))
    assert refused.value.code == "too_far"


# --- the ruleset file ------------------------------------------------------------------------


def test_the_standard_ruleset_matches_the_rules() -> None:
    """§1-§6: 30 tokens dealt in 12 stacks, one of each good removed, 13 regions."""
    r = load_ruleset("standard")
    assert sum(reg.stack for reg in r.map.regions) == 30
    assert len(r.map.regions) == 13 and len(r.map.borders) == 15
    assert [len(g.tokens) for g in r.goods] == [9, 11, 13]


@pytest.mark.parametrize(
    ("path", "value", "named"),
    [
        (("map", "home"), "lisboa", "map.home"),
        (("player", "money"), -5, "player.money"),
        (("goods", 0, "removed"), 2, "goods.0"),
        (("market", "start_row"), 11, "market.start_row"),
        (("map", "borders", 0), ["portugal", "atlantis"], "map.borders.0"),
        (("rondel", "fields", 0), "tavern", "rondel"),
        (("gallery", "reset", "3"), [1], "gallery.reset.3"),
    ],
)
def test_a_wrong_ruleset_is_refused_naming_the_field(
    path: tuple[object, ...], value: object, named: str
) -> None:
    """A ruleset file with a wrong value is refused with a message naming the field."""
    import tomllib

    data = tomllib.loads(STANDARD.read_text(encoding="utf-8"))
    node = data
    for key in path[:-1]:
        node = node[key]  # type: ignore[index]
    node[path[-1]] = value  # type: ignore[index]
    with pytest.raises(RulesetError) as refused:
        parse_ruleset(data)
    assert named in str(refused.value)


def test_a_house_ruleset_changes_the_map(tmp_path: Path) -> None:
    """Rules are data: a house ruleset with Guiné bordering Bahia and Angola removed from
    Portugal's reach... here simply a new border Portugal-Bahia lets ships reach Bahia."""
    text = STANDARD.read_text(encoding="utf-8").replace(
        '["portugal", "guine"],', '["portugal", "guine"],\n  ["portugal", "bahia"],'
    )
    house = tmp_path / "house.toml"
    house.write_text(text.replace('name = "standard"', 'name = "house"'), encoding="utf-8")
    game_ = api.get("navegador")
    rules = game_.rules(str(house))
    assert RULES.regions.index("bahia") in rules.adjacent[rules.home]
    state, _ = game_.new_game(rules, 3, seed=4)
    assert state.rules is rules


# --- hidden information, results, facts ------------------------------------------------------


def test_hidden_stacks_appear_in_no_view_and_no_public_event() -> None:
    """§9: the stacks of unexplored regions and the removed tokens are in no view and no
    public event; determinize redraws exactly them."""
    g = api.get("navegador")
    state, events = g.new_game(g.rules("standard"), 3, seed=11)
    public = json.dumps([e.redacted().to_dict() for e in events])
    assert "stacks" not in public and "removed" not in public
    seen = view(state, 0)
    assert all(r["tokens"] is None for r in seen["regions"] if r["id"] != "portugal")
    twin = determinize(state, 5)
    assert twin.stacks != state.stacks or twin.removed != state.removed
    assert view(twin, 0) == seen and view(twin, None) == view(state, None)
    assert every_token(twin) == every_token(state)


def every_token(s: State) -> list[int]:
    return sorted(p for pile in (*s.stacks, *s.removed) for p in pile)


def test_results_and_facts_of_a_random_game() -> None:
    """Results carry the breakdown per column and sum to the totals; facts name every
    exploration, colony, building and privilege of the log."""
    g = api.get("navegador")
    kinds: set[str] = set()
    for seed in range(4):
        played = api.play_random_game(g, g.rules("standard"), 3, seed=seed)
        kinds |= {f.kind for e in played.events for f in g.facts(played.state, e)}
    results = g.results(played.state)
    assert all(sum(r.breakdown.values()) == r.total for r in results)
    assert set(results[0].breakdown) == {
        "workers",
        "ships",
        "money",
        "colony_vp",
        "factory_vp",
        "explorer_vp",
        "shipyard_vp",
        "church_vp",
    }
    assert {"exploration", "colony", "building_bought", "privilege"} <= kinds


def test_turn_positions_go_round_from_the_drawn_start_player() -> None:
    """Setup: the start player is drawn and play goes round clockwise from it, so seat
    ``start + k`` is ``k``-th in turn order for the whole game."""
    nav = api.get("navegador")
    for seed in range(3):
        played = api.play_random_game(nav, nav.rules("standard"), 4, seed)
        start = next(e for e in played.events if e.type == "setup").data["start_player"]
        assert nav.turn_positions(played.state) == [(seat - start) % 4 for seat in range(4)]
