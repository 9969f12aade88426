"""How the search judges a Navegador position it stops playing out: each seat's expected final
total, its score now plus what its assets will still bring.

The playouts of the ``mcts`` bot are cut after a few turns, mid-game, where the score alone
is blind to most of what decides a game: colonies and factories pay at every Market action
still to come, workers and ships serve colonies, buildings and explorations, and money buys
VP at a far better rate than the 1 VP per 200 Cr it scores at the end. Each asset is worth a
number of VP per unit of the game still to come (:func:`game_left`: 1 at the start, 0 when
it ends); at the end the evaluation is the exact score.

The weights are fitted (least squares, seat totals measured from their table's mean) to what
the assets brought by the end of 400 greedy games of 2 to 5 seats, rounded: the greedy
policy plays the playouts, so its own continuation is what the evaluation predicts. They
sit near its unit values (``greedy.VP`` = 80 Cr): a colony's or factory's income of 50 Cr a
Market action is worth about 7 VP over a whole game, a worker or a ship 3 VP, a shipyard or
church 5 VP.
"""

from __future__ import annotations

from .scoring import score
from .state import State

MONEY = 1 / 25  # VP per Cr beyond its final 1 per 200, over a whole game still to come
INCOME = 1.5  # VP per 10 Cr a colony sells, or a factory processes, for at the market now
WORKER = 3.0  # VP per worker beyond its own, over a whole game
SHIP = 3.0  # VP per ship on the board beyond its own
FACILITY = 5.0  # VP per shipyard or church beyond its column's (cheap ships, workers)


def game_left(s: State) -> float:
    """The share of the game still to come, 1 at the start: the end comes when Nagasaki is
    explored or the last building taken (rules §8), so the unexplored regions and the
    buildings left tell how far it has gone, the nearer end counting."""
    rules = s.rules
    regions = len(rules.regions)
    unexplored = regions - bin(s.explored).count("1")
    built = sum(t.on_board(s.n) for t in rules.tracks)
    return min(unexplored / max(1, regions - 1), sum(s.left) / max(1, built))


def expected_totals(s: State) -> list[float]:
    """Each seat's score now plus what its assets will still bring (exact once over)."""
    rows = score(s)
    if s.stage == "over":
        return [float(row["total"]) for row in rows]
    left = game_left(s)
    rules = s.rules
    per_vp = rules.ruleset.prices.money_per_vp
    goods = range(len(rules.goods))
    prices = [rules.prices[s.market[g]][g] for g in goods]
    incomes = [rules.factory_income[s.market[g]] for g in goods]
    out = []
    for seat, row in enumerate(rows):
        money = s.money[seat]
        income = sum(
            len(s.colonies[seat][g]) * prices[g] + s.factories[seat][g] * incomes[g] for g in goods
        )
        assets = (
            MONEY * money
            + INCOME * income / 10
            + WORKER * s.workers[seat]
            + SHIP * s.on_board(seat)
            + FACILITY * (s.shipyards[seat] + s.churches[seat])
        )
        out.append(row["total"] - money // per_vp + money / per_vp + left * assets)
    return out
