"""How the search judges a Navegador position it stops playing out: each seat's expected final
total, its score now plus what its assets will still bring.

The playouts of the ``mcts`` bot are cut after a few turns, mid-game, where the score alone
is blind to most of what decides a game: colonies and factories pay at every Market action
still to come, workers and ships serve colonies, buildings and explorations, and money buys
VP at a far better rate than the 1 VP per 200 Cr it scores at the end. Each asset is worth a
number of VP per unit of the game still to come (:func:`game_left`: 1 at the start, 0 when
it ends); at the end the evaluation is the exact score.

The weights are fitted to what the assets brought by the end of 400 greedy games of 2 to 5
seats (least squares, each seat measured from its table's mean: the search compares seats),
then rounded down towards the greedy policy's own unit values (``greedy.VP``: 80 Cr): the
greedy policy plays the playouts, so its own continuation is what the evaluation predicts.
A colony's or factory's income of 50 Cr a Market action is worth 7.5 VP over a whole game,
a worker or a ship 3 VP, a shipyard or church 5 VP (fitted: 9, 3.3, 3.5, 7.3), money 1 VP
per 25 Cr (fitted: 20). ``python benchmarks/navegador_evaluate.py --fit`` fits them again
and measures the prediction: its squared error is 94 VP² where the score now gives 121.
"""

from __future__ import annotations

from ..protocol import SearchHints
from .scoring import score
from .state import State

ASSETS = ("money", "income", "workers", "ships", "facilities")
"""What :func:`assets` counts per seat, in this order."""
WEIGHTS = (
    1 / 25,  # VP per Cr beyond its final 1 per 200
    1.5,  # per 10 Cr a colony sells, or a factory processes, for at the market now
    3.0,  # per worker, beyond its own VP
    3.0,  # per ship on the board, beyond its own VP
    5.0,  # per shipyard or church, beyond its column's VP (cheap ships, workers)
)
"""VP per unit of each of :data:`ASSETS` over a whole game still to come."""


def game_left(s: State) -> float:
    """The share of the game still to come, 1 at the start: the end comes when Nagasaki is
    explored or the last building taken (rules §8), so the unexplored regions and the
    buildings left tell how far it has gone, the nearer end counting."""
    rules = s.rules
    regions = len(rules.regions)
    unexplored = regions - bin(s.explored).count("1")
    built = sum(t.on_board(s.n) for t in rules.tracks)
    return min(unexplored / max(1, regions - 1), sum(s.left) / max(1, built))


def assets(s: State, seat: int) -> tuple[float, ...]:
    """The seat's :data:`ASSETS`: money, the income of its colonies and factories at the
    market's prices now (in tens of Cr), workers, ships on the board, shipyards and
    churches."""
    rules = s.rules
    income = 0
    for g in range(len(rules.goods)):
        row = s.market[g]
        income += len(s.colonies[seat][g]) * rules.prices[row][g]
        income += s.factories[seat][g] * rules.factory_income[row]
    facilities = s.shipyards[seat] + s.churches[seat]
    return (s.money[seat], income / 10, s.workers[seat], s.on_board(seat), facilities)


def expected_totals(s: State) -> list[float]:
    """Each seat's score now plus what its assets will still bring (exact once over)."""
    rows = score(s)
    if s.stage == "over":
        return [float(row["total"]) for row in rows]
    left = game_left(s)
    per_vp = s.rules.ruleset.prices.money_per_vp
    out = []
    for seat, row in enumerate(rows):
        money = s.money[seat]
        worth = sum(w * a for w, a in zip(WEIGHTS, assets(s, seat), strict=True))
        out.append(row["total"] - money // per_vp + money / per_vp + left * worth)
    return out


SEARCH_HINTS = SearchHints(
    reward_scale=8.0, rollout_decisions=32, turn_start="turn", search_opponents=False
)
"""How the ``mcts`` search reads :func:`expected_totals`.

Opponents play the greedy policy in the tree as in the playouts (``search_opponents``): a
turn is many small commands, so when the tree searched every seat three quarters of its
nodes in a 4-player game were opponents' (at 1 s on positions of a greedy game: 136 of 176
nodes, 151 of 155), and the more they were visited the more their most visited command left
the policy's best (in 8 of 21 opponent nodes of 10 visits or more): more time modelled the
greedy opponents worse and left the bot's own choices a few children each.

Playouts end where the bot's next turn begins (``turn_start``), after 32 decisions at least:
a cut after a fixed number of decisions falls after more or fewer turns as the bot's own
turn took few or many commands, and the evaluation counts the gains of the turns it saw (at
1 s from one position, Workers's playouts saw 11.0 turns and Market's 9.9, every one now
12).

Rewards squash the margin over the best rival by 8 VP (the default 4 is The Age of
Discovery's): Navegador's margins run 10-30 VP and the evaluation errs by about 10 (its
squared error is 94 VP²), so at 4 a seat 14 VP behind saw every command within 0.03-0.045
and UCB1's exploration spread the visits evenly (60-68 each over 8 commands at 1 s).
"""
