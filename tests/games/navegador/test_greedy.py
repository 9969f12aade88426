"""Navegador's greedy policy against random play."""

from __future__ import annotations

import copy
import random
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shared.games import api
from shared.games.navegador import greedy

from ..strategies import PROPERTY_SETTINGS, SEEDS

RULESETS = Path(greedy.__file__).parent / "rulesets"
SHIP_COST = greedy.SHIP_COST


def test_greedy_beats_random_players() -> None:
    """In 4-player games of one greedy seat against three random ones (the greedy seat
    rotating), the greedy seat wins at least 5 of 6 games; with random skill it would win
    about a quarter of them."""
    game = api.get("navegador")
    rules = game.rules("standard")
    policy = game.policy()
    assert policy is not None
    wins = 0
    for seed in range(6):
        state, _ = game.new_game(rules, 4, seed)
        rnd = random.Random(seed)
        greedy = seed % 4
        while decisions := game.pending(state):
            seat = decisions[0].seat
            legal = game.legal_commands(state, seat)
            if seat == greedy:
                values = policy(game.view(state, seat), rnd)
                command = legal[max(range(len(legal)), key=values.__getitem__)]
            else:
                command = rnd.choice(legal)
            game.decide_into(state, command)
        wins += {r.seat: r.place for r in game.results(state)}[greedy] == 1
    assert wins >= 5


GREEDY_TABLE_DECISIONS = 1_500  # measured: 275 to 629 over 50 seeds (median 424)


def test_a_table_of_greedy_seats_finishes_its_games() -> None:
    """Four greedy seats end each of three seeded games within 1,500 decisions: the end
    comes when Nagasaki is explored or the last building is taken (rules §8), and exploring
    needs two ships arriving together, three with the double loss (§4), so the policy must
    gather parties and push on to Nagasaki (or buy the buildings out). It once looped on
    the market and on empty privileges and was still in phase I after 3,000 decisions."""
    game = api.get("navegador")
    rules = game.rules("standard")
    policy = game.policy()
    assert policy is not None
    for seed in range(3):
        state, _ = game.new_game(rules, 4, seed)
        rnd = random.Random(seed)
        for _ in range(GREEDY_TABLE_DECISIONS):
            decisions = game.pending(state)
            if not decisions:
                break
            seat = decisions[0].seat
            legal = game.legal_commands(state, seat)
            values = policy(game.view(state, seat), rnd)
            game.decide_into(state, legal[max(range(len(legal)), key=values.__getitem__)])
        assert game.is_over(state), (
            f"seed {seed}: not over after {GREEDY_TABLE_DECISIONS} decisions "
            f"(phase {state.phase}, {bin(state.explored).count('1') - 1} regions explored)"
        )
        assert state.triggered


HOUSE_FREE_STEPS = 1


def house_ruleset(folder: Path) -> Path:
    """The standard board as a file of another name (no loader knows it) whose rondel gives
    one free step instead of three."""
    text = (RULESETS / "standard.toml").read_text(encoding="utf-8")
    text = text.replace('name = "standard"', 'name = "harbour_house"', 1)
    text = text.replace("free_steps = 3", f"free_steps = {HOUSE_FREE_STEPS}", 1)
    path = folder / "harbour_house.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_greedy_plays_a_ruleset_given_as_a_file(tmp_path: Path) -> None:
    """The greedy policy reads the board off the view, not a ruleset by name: on a ruleset
    file whose name no loader knows it plays a whole game against random seats, and it
    prices a rondel move with the file's free steps (changing them in the view changes
    exactly the values of the moves they make dearer). The policy view a greedy seat is
    sent (``policy_view``: the board, no ruleset name or file) values every move alike."""
    game = api.get("navegador")
    rules = game.rules(str(house_ruleset(tmp_path)))
    policy = game.policy()
    assert policy is not None
    state, _ = game.new_game(rules, 4, 3)
    rnd = random.Random(3)
    compared = 0
    while decisions := game.pending(state):
        seat = decisions[0].seat
        legal = game.legal_commands(state, seat)
        if seat != 0:
            game.decide_into(state, rnd.choice(legal))
            continue
        view = game.view(state, seat)
        assert view["ruleset"] == "harbour_house" and view["board"]["free_steps"] == 1
        values = policy(view, random.Random(0))
        assert len(values) == len(legal)
        part = game.policy_view(state, seat)  # no ruleset's name or file in it: the board
        assert part is not None and "ruleset" not in part
        assert (
            policy({**part, "legal_commands": view["legal_commands"]}, random.Random(0)) == values
        )
        here = view["players"][0]["stone"]
        if view["stage"] == "turn" and here is not None:
            standard = copy.deepcopy(view)
            standard["board"]["free_steps"] = 3
            again = policy(standard, random.Random(0))
            for c, house, std in zip(view["legal_commands"], values, again, strict=True):
                if c["type"] != "rondel":
                    continue
                steps = (c["field"] - here) % len(view["rondel"]) or len(view["rondel"])
                extra = max(0, steps - HOUSE_FREE_STEPS) - max(0, steps - 3)
                assert std - house == pytest.approx(SHIP_COST * extra), (c, steps)
                compared += extra > 0
        game.decide_into(state, legal[max(range(len(legal)), key=values.__getitem__)])
    assert game.is_over(state)
    assert compared, "no rondel move that the file's free steps make dearer was valued"


@settings(max_examples=12, **PROPERTY_SETTINGS)
@given(players=st.integers(2, 5), seed=SEEDS, greedy_share=st.sampled_from([0.0, 0.5, 0.9]))
def test_the_state_policy_reads_what_the_view_shows(
    players: int, seed: int, greedy_share: float
) -> None:
    """The search's playouts value commands with the policy read straight off a whole state
    (``state_policy``). At every decision of a game whose seats play greedy moves (a drawn
    share of them, the rest random, so that explorations, colonies, buildings and the end
    all come up) it gives each legal command exactly the value the greedy policy gives it
    from the seat's view; and a copy of the state with its face-down stacks and removed
    tokens dealt anew (:meth:`determinize`) gets the same values: it reads nothing the
    view hides."""
    game = api.get("navegador")
    state_policy = game.state_policy()
    state, _ = game.new_game(game.rules("standard"), players, seed)
    rnd = random.Random(seed)
    checked = 0
    while decisions := game.pending(state):
        seat = decisions[0].seat
        legal = game.legal_commands(state, seat)
        from_view = greedy.greedy_values(game.view(state, seat), random.Random(checked))
        assert state_policy(state, seat, legal, random.Random(checked)) == from_view
        if checked % 7 == 0:
            dealt = game.determinize(state, rnd.getrandbits(32))
            assert state_policy(dealt, seat, legal, random.Random(checked)) == from_view
        checked += 1
        if rnd.random() < greedy_share:
            command = legal[max(range(len(legal)), key=from_view.__getitem__)]
        else:
            command = rnd.choice(legal)
        game.decide_into(state, command)
    assert checked
