"""``caravel lab`` and ``caravel analytics``: the balance lab's runs and comparisons, and
the analytics store's exports."""

from __future__ import annotations

import functools
import signal
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.table import Table

from shared.contracts import dump_json
from shared.games import api
from shared.settings import Settings

from .cli_support import (
    DATE_FORMATS,
    GAME_HELP,
    console,
    err_console,
    game_named,
    parse_options,
    progress_bar,
)

if TYPE_CHECKING:
    from sqlalchemy import Engine

lab = typer.Typer(help="A balance lab: bot games recorded under an experiment's name.")


def _analytics_db() -> Engine:
    from services.lobby.db import make_engine

    return make_engine(Settings().sql_url())


@lab.command("run")
def lab_run(
    game_name: Annotated[str, typer.Option("--game", help=GAME_HELP)] = api.DEFAULT_GAME,
    seats: Annotated[
        str, typer.Option(help="Bot level per seat, comma-separated (random, greedy, mcts).")
    ] = "greedy,greedy,greedy,greedy",
    games: Annotated[int, typer.Option(min=1)] = 1000,
    ruleset: Annotated[
        str | None,
        typer.Option(help="A shipped ruleset name or a .toml path (default: the game's)."),
    ] = None,
    option: Annotated[list[str] | None, typer.Option("--option", help="KEY=VALUE")] = None,
    experiment: Annotated[str, typer.Option(help="The name the games are recorded under.")] = "",
    workers: Annotated[int, typer.Option(min=0, help="Processes (0: every core).")] = 0,
    seed: Annotated[int, typer.Option()] = 1,
    live: Annotated[
        bool,
        typer.Option(help="Play through the running pipeline (caravel up), not in process."),
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object last.")] = False,
) -> None:
    """Play bot games with the real rules on every core and record them in the analytics
    store (CARAVEL_DATABASE_URL) under ``--experiment``: whole, or marked incomplete. With
    ``--live``, the engine, bots and scoring of a running pipeline (CARAVEL_REDIS_URL)
    play and record them."""
    from services.lab import LabError, LabRun, run_lab
    from services.lab_live import play_live

    signal.signal(signal.SIGTERM, signal.default_int_handler)  # marked incomplete, as Ctrl-C
    levels = tuple(s.strip() for s in seats.split(",") if s.strip())
    spec = LabRun(
        game_name, levels, games, experiment, ruleset, parse_options(option or []), seed, workers
    )
    db = _analytics_db()
    try:
        with progress_bar(err_console if as_json else console) as progress:
            task = progress.add_task(f"lab {experiment}", total=games)
            advance = functools.partial(progress.advance, task)
            report = play_live(spec, db, advance) if live else run_lab(spec, db, advance)
    except LabError as e:
        raise typer.BadParameter(str(e)) from None
    finally:
        db.dispose()
    result = {
        "experiment": report.experiment,
        "games": report.games,
        "status": report.status,
        "workers": report.workers,
        "seconds": round(report.seconds, 2),
        "cpu_seconds": round(report.cpu_seconds, 2),
        "games_per_second": round(report.games_per_second, 1),
        "games_per_cpu_second": round(report.games_per_cpu_second, 1),
    }
    if as_json:
        print(dump_json(result))
        return
    where = "through the pipeline" if live else f"on {report.workers} workers"
    console.print(
        f"{report.experiment}: {report.games} games ({report.status}) in {report.seconds:.1f} s "
        f"{where}: {report.games_per_second:.1f} games/s"
        + ("" if live else f", {report.games_per_cpu_second:.1f} games per CPU second")
    )


@lab.command("compare")
def lab_compare(
    a: Annotated[str, typer.Argument(help="Experiment A.")],
    b: Annotated[str, typer.Argument(help="Experiment B.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """Every difference between two experiments (turn positions, sides, seat kinds,
    breakdown means, fact owners' win rates) with its 95% interval and p-value; * marks
    the significant ones after a Holm-Bonferroni correction over all the differences."""
    from services.scoring import stats
    from services.scoring.db import create_tables

    db = _analytics_db()
    try:
        create_tables(db)  # a fresh database answers "known: none", not a traceback
        with db.connect() as conn:
            found = {e["name"]: e for e in stats.experiments(conn)}
            for name in (a, b):
                if name not in found:
                    known = ", ".join(sorted(found)) or "none"
                    raise typer.BadParameter(f"no experiment {name!r}; known: {known}")
            figures = [
                stats.figures(conn, stats.check(conn, stats.Filter(found[n]["game"], experiment=n)))
                for n in (a, b)
            ]
    finally:
        db.dispose()
    result = stats.compare(*figures)
    if as_json:
        print(dump_json(result, fallback=str))
        return
    _print_comparison(a, b, result)


def _print_comparison(a: str, b: str, result: dict[str, Any]) -> None:
    console.print(f"A = {a} ({result['games'][0]} games), B = {b} ({result['games'][1]} games)")
    tests = result["correction"]["tests"]
    table = Table(
        title=f"A - B (95% interval); * significant at 5% after Holm-Bonferroni over {tests}"
        " differences (p: Holm-adjusted)"
    )
    for column in ("figure", "A", "B", "A - B", "95% interval", "p", ""):
        table.add_column(column, justify="right" if column else "left")

    def rate_row(name: str, row: dict[str, Any]) -> None:
        table.add_row(
            name,
            f"{row['a']['rate']:.1%} (n={row['a']['n']})",
            f"{row['b']['rate']:.1%} (n={row['b']['n']})",
            f"{row['diff']:+.1%}",
            f"{row['low']:+.1%} to {row['high']:+.1%}",
            f"{row['p_adjusted']:.3g}",
            "*" if row["significant"] else "",
        )

    for part, title in (
        ("turn_position", "win rate, turn position"),
        ("side", "win rate, side"),
        ("seat_kind", "win rate, seat kind"),
    ):
        for row in result[part]:
            rate_row(f"{title} {row['value']}", row)
    for name, row in result["means"].items():
        table.add_row(
            f"mean {name}",
            f"{row['a']['mean']:.2f} (n={row['a']['n']})",
            f"{row['b']['mean']:.2f} (n={row['b']['n']})",
            f"{row['diff']:+.2f}",
            f"{row['low']:+.2f} to {row['high']:+.2f}",
            f"{row['p_adjusted']:.3g}",
            "*" if row["significant"] else "",
        )
    for row in result["facts"]:
        rate_row(f"win rate of owners, {row['kind']} {row['subject']}", row)
    console.print(table)


analytics_app = typer.Typer(help="The analytics store: exports.", no_args_is_help=True)


@analytics_app.command("export")
def analytics_export(
    output: Annotated[Path, typer.Option("-o", "--output", help="A directory to write.")],
    fmt: Annotated[str, typer.Option("--format", help="parquet or csv.")] = "parquet",
    game_name: Annotated[str | None, typer.Option("--game", help=GAME_HELP)] = None,
    since: Annotated[
        datetime | None, typer.Option(help="Finished at or after.", formats=DATE_FORMATS)
    ] = None,
    until: Annotated[
        datetime | None, typer.Option(help="Finished before.", formats=DATE_FORMATS)
    ] = None,
    experiment: Annotated[str | None, typer.Option(help="Only this lab experiment.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object last.")] = False,
) -> None:
    """Write the flat results table and the seat facts: Parquet datasets partitioned by
    game and month (``OUTPUT/results/game=…/month=…/``), or ``results.csv`` and
    ``facts.csv``. Results and facts only: never a secret."""
    from services.scoring.export import FORMATS, Scope, write_csv, write_parquet

    if fmt not in FORMATS:
        raise typer.BadParameter(f"unknown format {fmt!r}; known: {', '.join(FORMATS)}")
    if game_name is not None:
        game_named(game_name)
    utc = [t if t is None or t.tzinfo else t.replace(tzinfo=UTC) for t in (since, until)]
    scope = Scope(game_name, utc[0], utc[1], experiment)
    db = _analytics_db()
    started = time.perf_counter()
    try:
        counts = (write_parquet if fmt == "parquet" else write_csv)(db, scope, output)
    finally:
        db.dispose()
    result = {"format": fmt, "output": str(output), **{k: round(v, 2) for k, v in counts.items()}}
    result["seconds"] = round(time.perf_counter() - started, 2)
    if as_json:
        print(dump_json(result))
        return
    console.print(
        f"{counts['results']} result rows and {counts['facts']} fact rows to {output} "
        f"({fmt}) in {result['seconds']} s"
    )
