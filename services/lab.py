"""``caravel lab``: a balance lab. Bot games with the real rules, in process on every core,
recorded in the analytics store (the flat results table) under an experiment's name.

Games are played by worker processes in chunks; the parent writes each chunk's rows as it
arrives. The experiment's row says how far it got: ``running`` while it plays, ``complete``
once every game is written, ``incomplete`` if it stopped before (an error, Ctrl-C). A ruleset
or an option the game refuses is refused before anything is written.

``greedy`` seats play the game's greedy policy read off the state (the same values the
greedy bot computes from the seat's view: the game's ``state_policy``); ``random``
seats a uniform legal command; other levels are the bots of :mod:`services.ai.bots`, played
from the seat's view.
"""

from __future__ import annotations

import gc
import multiprocessing
import os
import random
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Engine, insert, select, update

from services.scoring import flat
from services.scoring.cells import Group, groups_of, refresh, refresh_all
from services.scoring.db import create_tables
from shared.games import api
from shared.games.api import analytics

CHUNK = 50  # games per task: few enough to spread, many enough to amortise a process hop
MAX_NAME = 40
REFRESH_S = 5.0  # seconds between two refreshes of a running experiment's cells, at least
REFRESH_SHARE = 0.025  # of the parent's time, at most, spent refreshing them while it plays


class LabError(ValueError):
    """A run that cannot start: the message names what is wrong."""


@dataclass(frozen=True)
class LabRun:
    """What to play: the game, a bot level per seat, how many games, the rules, the name."""

    game: str
    seats: tuple[str, ...]
    games: int
    experiment: str
    ruleset: str | None = None
    options: dict[str, str] = field(default_factory=dict)
    seed: int = 1
    workers: int = 0  # 0: every core


@dataclass
class LabReport:
    experiment: str
    games: int
    status: str
    seconds: float
    cpu_seconds: float
    workers: int

    @property
    def games_per_second(self) -> float:
        return self.games / self.seconds if self.seconds else 0.0

    @property
    def games_per_cpu_second(self) -> float:
        return self.games / self.cpu_seconds if self.cpu_seconds else 0.0


def check(run: LabRun) -> tuple[api.AnyGame, Any]:
    """The game and its compiled rules, or :class:`LabError` naming what is wrong."""
    try:
        game = api.get(run.game)
    except api.UnknownGame as e:
        raise LabError(str(e)) from None
    if not run.experiment or len(run.experiment) > MAX_NAME:
        raise LabError(f"an experiment is named by 1 to {MAX_NAME} characters")
    known = api.bot_levels(game)
    if unknown := [s for s in run.seats if s not in known]:
        raise LabError(f"unknown levels {unknown}; known: {', '.join(known)}")
    if not game.min_players <= len(run.seats) <= game.max_players:
        raise LabError(f"{game.title} takes {game.min_players} to {game.max_players} players")
    try:
        rules = game.rules(run.ruleset or game.default_ruleset, run.options)
        game.new_game(rules, len(run.seats), run.seed)
    except api.RulesetError as e:
        raise LabError(str(e)) from None
    except api.RuleViolation as v:
        raise LabError(v.reason) from None
    return game, rules


# --- playing (in the worker processes) ------------------------------------------------------


def _chooser(game: api.AnyGame, level: str) -> Callable[[Any, int, random.Random], api.Command]:
    """How a seat of ``level`` picks its command in a state."""
    if level == "random":
        return lambda state, seat, rng: rng.choice(game.legal_commands(state, seat))
    if level == "greedy":
        policy = game.state_policy()
        assert policy is not None

        def greedy(state: Any, seat: int, rng: random.Random) -> api.Command:
            legal = game.legal_commands(state, seat)
            values = policy(state, seat, legal, rng)
            return legal[values.index(max(values))]  # the first best, as max(key=) finds

        return greedy
    from services.ai.bots import bot

    player = bot(level)
    return lambda state, seat, rng: game.parse_command(player.choose(game.view(state, seat), rng))


def play(run: LabRun, index: int, rules: Any) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Game ``index`` of a run: its flat rows and seat facts."""
    game = api.get(run.game)
    choosers = [_chooser(game, level) for level in run.seats]
    seed = run.seed + index
    started = time.perf_counter()
    state, events = game.new_game(rules, len(run.seats), seed)
    rng = random.Random(seed)
    facts: flat.SeatFacts = {}
    decisions = 0
    for event in events:
        flat.count_facts(facts, game.facts(state, event))
    trusted = [level in ("random", "greedy") for level in run.seats]
    while pending := game.pending(state):
        seat = pending[0].seat
        command = choosers[seat](state, seat, rng)
        for event in game.decide_into(state, command, trusted=trusted[seat]):
            if found := game.facts(state, event):  # most events have none
                flat.count_facts(facts, found)
        decisions += 1
    game_id = f"lab-{run.experiment}-{index:07d}"
    kinds = [f"bot:{level}" for level in run.seats]
    rows = flat.result_rows(
        game=game,
        game_id=game_id,
        ruleset=events[0].data["ruleset"],
        ruleset_hash=analytics.ruleset_hash(rules),
        options=events[0].data["options"],
        seat_kinds=kinds,
        players=kinds,
        positions=game.turn_positions(state),
        results=game.results(state),
        decisions=decisions,
        duration_s=time.perf_counter() - started,
        finished_at=datetime.now(UTC),
        experiment=run.experiment,
    )
    return rows, flat.fact_rows(rows, facts)


_RUN: tuple[LabRun, Any] | None = None  # a worker's run and rules, set once per process


def _init(run: LabRun) -> None:
    """Set the worker's run and rules, then freeze what is allocated so far (the modules,
    the compiled rules): the collector's older generations would scan them again and
    again while the worker plays, about 2% of a Navegador game's CPU."""
    global _RUN
    _RUN = (run, check(run)[1])
    gc.freeze()


_Played = tuple[int, list[dict[str, Any]], list[dict[str, Any]], float]
"""A chunk's games played: how many, their rows, their seat facts, the CPU seconds."""


def _chunk(bounds: tuple[int, int]) -> _Played:
    """Games ``bounds`` of the run: their rows, seat facts and the CPU seconds they took."""
    assert _RUN is not None
    run, rules = _RUN
    cpu = time.process_time()
    results: list[dict[str, Any]] = []
    facts: list[dict[str, Any]] = []
    for index in range(*bounds):
        r, f = play(run, index, rules)
        results += r
        facts += f
    return bounds[1] - bounds[0], results, facts, time.process_time() - cpu


def _chunks(games: int) -> Iterator[tuple[int, int]]:
    for start in range(0, games, CHUNK):
        yield start, min(games, start + CHUNK)


def _played(pool: ProcessPoolExecutor, workers: int, games: int) -> Iterator[_Played]:
    """The chunks of ``games`` played by ``pool``, as each ends: two a worker in flight at
    most, so that a long run's rows are not all held at once."""
    bounds = _chunks(games)
    pending: set[Future[_Played]] = set()
    for _ in range(2 * workers):
        if (chunk := next(bounds, None)) is not None:
            pending.add(pool.submit(_chunk, chunk))
    while pending:
        done, pending = wait(pending, return_when=FIRST_COMPLETED)
        for future in done:
            if (chunk := next(bounds, None)) is not None:
                pending.add(pool.submit(_chunk, chunk))
            yield future.result()


# --- recording (in the parent) ---------------------------------------------------------------


class _Refresher:
    """Sums the cells of the groups (game, experiment, finished second) a run wrote to since
    the last time, then their minutes and hours from those finer cells (``cells.refresh``),
    every ``every`` seconds at least and never more than :data:`REFRESH_SHARE` of the time
    (0: after every chunk): refreshing after every chunk of a long run would sum the same
    busy seconds again and again, and the parent's CPU is taken from the workers (a tenth of
    its time was about 5% of a 10,000-game run's CPU)."""

    def __init__(self, db: Engine, every: float) -> None:
        self._db = db
        self._every = every
        self._groups: set[Group] = set()
        self._last = time.perf_counter()
        self._took = 0.0

    def wrote(self, results: Sequence[dict[str, Any]]) -> None:
        self._groups |= groups_of(results)
        waited = time.perf_counter() - self._last
        if self._every and waited < max(self._every, self._took / REFRESH_SHARE - self._took):
            return
        started = time.perf_counter()
        with self._db.begin() as conn:
            refresh(conn, self._groups)
        self._groups = set()
        self._last = time.perf_counter()
        self._took = self._last - started


def _insert(db: Engine, results: Sequence[dict[str, Any]], facts: Sequence[dict[str, Any]]) -> None:
    with db.begin() as conn:
        for table, rows in ((flat.RESULTS, results), (flat.SEAT_FACTS, facts)):
            for i in range(0, len(rows), 500):
                conn.execute(insert(table), list(rows[i : i + 500]))


def mark(db: Engine, name: str, **values: Any) -> None:
    """Update the experiment's row (how many games, its status)."""
    with db.begin() as conn:
        conn.execute(
            update(flat.EXPERIMENTS).where(flat.EXPERIMENTS.c.name == name).values(**values)
        )


def start_experiment(db: Engine, run: LabRun, game: api.AnyGame, rules: Any) -> None:
    """Write the experiment's row (``running``); :class:`LabError` if the name is taken."""
    create_tables(db)
    first = game.new_game(rules, len(run.seats), run.seed)[1][0]  # its options, as played
    created = flat.experiment_row(
        name=run.experiment,
        game=game.name,
        ruleset=run.ruleset or game.default_ruleset,
        ruleset_hash=analytics.ruleset_hash(rules),
        options=first.data["options"],
        levels=run.seats,
        planned=run.games,
        started_at=datetime.now(UTC),
    )
    with db.begin() as conn:
        exists = conn.execute(
            select(flat.EXPERIMENTS.c.name).where(flat.EXPERIMENTS.c.name == run.experiment)
        ).first()
        if exists is not None:
            raise LabError(f"experiment {run.experiment!r} exists: name another")
        conn.execute(insert(flat.EXPERIMENTS), [created])


def run_lab(
    run: LabRun,
    db: Engine,
    progress: Callable[[int], None] | None = None,
    refresh_s: float = REFRESH_S,
) -> LabReport:
    """Play and record a run; refused (:class:`LabError`, nothing written) if its game,
    levels, rules or name cannot be used, or the experiment exists. The experiment's
    cells are summed again while it plays (:class:`_Refresher`, every ``refresh_s`` at
    least), so the page shows it growing, and once more at the end."""
    game, rules = check(run)
    start_experiment(db, run, game, rules)
    workers = run.workers or os.cpu_count() or 1
    started, cpu = time.perf_counter(), time.process_time()
    recorded, status, played_cpu = 0, "incomplete", 0.0
    refresher = _Refresher(db, refresh_s)
    context = multiprocessing.get_context("forkserver")  # no lock of a thread inherited
    pool = ProcessPoolExecutor(workers, context, initializer=_init, initargs=(run,))
    try:
        for count, results, facts, chunk_cpu in _played(pool, workers, run.games):
            played_cpu += chunk_cpu
            _insert(db, results, facts)
            recorded += count
            mark(db, run.experiment, games_recorded=recorded)
            refresher.wrote(results)
            if progress is not None:
                progress(count)
        status = "complete"
    finally:
        # Stopped (an error, Ctrl-C): the chunks not started are dropped, those in play end
        # in their workers, unrecorded. Not killed: `multiprocessing.Pool.terminate` killed
        # a worker in the middle of sending its chunk's rows, holding the results queue's
        # lock, and then hung for good putting its own sentinel on that queue (seen once
        # in CI, in `test_a_lab_run_that_stops_is_marked_incomplete`).
        pool.shutdown(wait=status == "complete", cancel_futures=True)
        with db.begin() as conn:  # the experiment's figures: its cells, summed once
            refresh_all(conn, run.experiment)
        mark(db, run.experiment, status=status, finished_at=datetime.now(UTC))
    seconds = time.perf_counter() - started
    return LabReport(
        run.experiment, recorded, status, seconds, time.process_time() - cpu + played_cpu, workers
    )
