"""How the search judges a Navegador position: the score now plus what assets will bring."""

from __future__ import annotations

from shared.games import api
from shared.games.navegador import evaluation

from .situations import explore, game, good

GAME = api.get("navegador")


def test_a_finished_game_is_judged_by_its_exact_score() -> None:
    """Once the game is over nothing more comes: the evaluation is each seat's final total
    (random games of 2 and 5 seats, whose seats end with money, ships and colonies)."""
    rules = GAME.rules("standard")
    for players in (2, 5):
        played = api.play_random_game(GAME, rules, players, players, keep_log=False)
        state = played.state
        assert GAME.is_over(state)
        totals = [float(r.total) for r in sorted(GAME.results(state), key=lambda r: r.seat)]
        assert GAME.evaluate(state) == totals


def test_assets_are_worth_more_the_more_game_is_left() -> None:
    """Two seats equal in score: the one whose money is in a colony, a worker and a ship
    (assets that bring more later) is judged ahead at the start, and its lead shrinks as
    the regions get explored, the game's end nearing."""
    s = game(players=2)
    s.money = [200, 200]
    early = GAME.evaluate(s)
    assert early[0] == early[1]
    s.colonies[0][good("gold")].append(60)
    s.workers[0] += 1
    s.ships[0][0] += 1
    s.money[0] -= 60 + 100 + 100
    lead_early = GAME.evaluate(s)[0] - GAME.evaluate(s)[1]
    assert lead_early > 0
    explore(s, "guine", "angola", "bahia", "rio_de_janeiro", "cabo_da_boa_esperanca")
    explore(s, "mocambique", "goa", "ceilao", "malaca", "timor")
    assert 0 < evaluation.game_left(s) < 0.3
    lead_late = GAME.evaluate(s)[0] - GAME.evaluate(s)[1]
    assert lead_late < lead_early


def test_the_share_of_game_left_follows_the_nearer_end() -> None:
    """The end comes with Nagasaki or the last building (rules §8): the share left is 1 at
    the start and follows whichever end is nearer."""
    s = game(players=4)
    assert evaluation.game_left(s) == 1.0
    s.left = [0] * len(s.left)
    s.left[0] = 1
    few = evaluation.game_left(s)
    assert 0 < few < 0.2
    explore(s, "guine", "angola")  # the buildings' end is still the nearer one
    assert evaluation.game_left(s) == few
