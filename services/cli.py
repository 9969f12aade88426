"""The ``caravel`` command line."""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer
from rich.progress import Progress
from rich.table import Table

from shared.contracts import dump_json, readable_json
from shared.games import api
from shared.observability import configure_logging
from shared.settings import Settings

from .cli_lab import analytics_app, lab
from .cli_support import (
    GAME_HELP,
    check_players,
    console,
    err_console,
    game_named,
    parse_options,
    progress_bar,
)

if TYPE_CHECKING:
    from sqlalchemy import Engine

    from shared.contracts import EventEnvelope
    from shared.eventstore import EventStore
    from shared.sql import Migrations

app = typer.Typer(
    help="Caravel: an open, event-sourced backend for hosting board games online.",
    no_args_is_help=True,
    add_completion=False,
)


@app.callback()
def main() -> None:
    """Caravel: host board games (see ``caravel games``), with bots, over Redis Streams."""


@app.command()
def simulate(
    game_name: Annotated[str, typer.Option("--game", help=GAME_HELP)] = api.DEFAULT_GAME,
    players: Annotated[int, typer.Option(help="Seats per game (the game's range).")] = 4,
    games: Annotated[int, typer.Option(min=1, help="How many games to play.")] = 100,
    seed: Annotated[int, typer.Option(help="Seed of the first game; game i uses seed+i.")] = 7,
    ruleset: Annotated[
        str | None,
        typer.Option(help="A shipped ruleset name or a .toml path (default: the game's)."),
    ] = None,
    option: Annotated[
        list[str] | None, typer.Option("--option", help="Edition option KEY=VALUE (repeatable).")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object last.")] = False,
) -> None:
    """Play complete games between random legal players, in process."""
    game = game_named(game_name)
    check_players(game, players)
    try:
        rules = game.rules(ruleset or game.default_ruleset, parse_options(option or []))
        # The first game's game_created names the ruleset and options as the rules resolved
        # them (defaults filled in), and refuses a player count this ruleset does not take.
        created = game.new_game(rules, players, seed)[1][0].data
    except api.RulesetError as e:
        raise typer.BadParameter(str(e)) from None
    except api.RuleViolation as v:
        raise typer.BadParameter(v.reason, param_hint="--players") from None

    results: list[list[api.SeatResult]] = []
    decisions = 0
    started = time.perf_counter()
    with progress_bar(err_console if as_json else console) as progress:
        task = progress.add_task("simulating", total=games)
        for i in range(games):
            played = api.play_random_game(game, rules, players, seed + i, keep_log=False)
            results.append(game.results(played.state))
            decisions += played.decisions
            progress.advance(task)
    elapsed = time.perf_counter() - started

    summary = summarize(results, players)
    result = {
        "game": game.name,
        "games": games,
        "players": players,
        "ruleset": created["ruleset"],
        "options": created["options"],
        "seconds": round(elapsed, 3),
        "games_per_second": round(games / elapsed, 2),
        "mean_decisions_per_game": round(decisions / games, 1),
        "decisions_per_second": round(decisions / elapsed, 1),
        "win_rate": summary["win_rate"],
        "mean_breakdown": summary["mean_breakdown"],
        "scores": [[seat.total for seat in by_seat(rows)] for rows in results],
    }
    if as_json:
        print(dump_json(result))
        return
    _print_summary(result)


def by_seat(rows: list[api.SeatResult]) -> list[api.SeatResult]:
    return sorted(rows, key=lambda row: row.seat)


def summarize(results: list[list[api.SeatResult]], players: int) -> dict[str, Any]:
    """Win rate per seat (a shared first place splits the win) and the mean of each part of
    the score (the game's breakdown, then the total)."""
    wins = [0.0] * players
    sums: list[dict[str, float]] = [{} for _ in range(players)]
    for rows in results:
        winners = [row.seat for row in rows if row.place == 1]
        for seat in winners:
            wins[seat] += 1 / len(winners)
        for row in by_seat(rows):
            parts = sums[row.seat]
            for part, value in (*row.breakdown.items(), ("total", row.total)):
                parts[part] = parts.get(part, 0) + value
    n = len(results)
    return {
        "win_rate": [round(w / n, 4) for w in wins],
        "mean_breakdown": [{k: round(v / n, 2) for k, v in seat.items()} for seat in sums],
    }


def _print_summary(result: dict[str, Any]) -> None:
    table = Table(title=f"{result['games']} random games, {result['players']} players")
    parts = list(result["mean_breakdown"][0])
    table.add_column("seat", justify="right")
    table.add_column("win rate", justify="right")
    for part in parts:
        table.add_column(part, justify="right")
    for seat, (rate, means) in enumerate(
        zip(result["win_rate"], result["mean_breakdown"], strict=True)
    ):
        table.add_row(str(seat), f"{rate:.1%}", *(f"{means[p]:.1f}" for p in parts))
    console.print(table)
    console.print(
        f"{result['games_per_second']:.1f} games/s, "
        f"{result['decisions_per_second']:.0f} decisions/s, "
        f"{result['mean_decisions_per_game']:.0f} decisions per game"
    )


games_app = typer.Typer(
    help="The registered games (alone or `list`); `export` and `import` move a game's log."
)
app.add_typer(games_app, name="games")
JSON_LIST = typer.Option("--json", help="Print one JSON array.")


@games_app.callback(invoke_without_command=True)
def games_command(ctx: typer.Context, as_json: Annotated[bool, JSON_LIST] = False) -> None:
    """The registered games: players, rulesets, edition options and bot levels."""
    if ctx.invoked_subcommand is None:
        _list_games(as_json)


@games_app.command("list")
def games_list(as_json: Annotated[bool, JSON_LIST] = False) -> None:
    """The registered games: players, rulesets, edition options and bot levels."""
    _list_games(as_json)


@games_app.command("export")
def games_export(
    game_id: Annotated[str, typer.Argument(help="The game (its table id).")],
    output: Annotated[
        Path | None,
        typer.Option("-o", "--output", help="A file (gzip if it ends in .gz); else stdout."),
    ] = None,
) -> None:
    """Write a game's whole log as JSON lines (from Redis, or from the archive once the game
    was archived), with its server-only parts: keep the file private."""
    from shared.eventstore import export_log, final_hash, logfile

    async def run(store: EventStore) -> tuple[list[EventEnvelope], bool, str | None]:
        events = await export_log(store, game_id)
        archived = bool(await store.archived([game_id]))
        return events, archived, await final_hash(store, events)

    events, archived, ended = _with_store(run)
    if not events:
        err_console.print(f"there is no game {game_id}")
        raise typer.Exit(1)
    if output is None:
        sys.stdout.buffer.write(logfile.dump_export(events, ended))
    else:
        logfile.write_file(output, events, ended)
    where = "the archive" if archived else "Redis"
    err_console.print(f"game {game_id}: {len(events)} events from {where}")


@games_app.command("import")
def games_import(
    file: Annotated[Path, typer.Argument(help="A log written by `caravel games export`.")],
) -> None:
    """Load a game's log into Redis, versions as they were (refused if the game exists)."""
    from shared.eventstore import GameExists, import_log, logfile

    try:
        header, events = logfile.read_export(file)
    except ValueError as e:  # missing, truncated, not JSON, not events: one line, exit 1
        typer.echo(f"cannot read {e}", err=True)
        raise typer.Exit(1) from None

    async def run(store: EventStore) -> int:
        return await import_log(store, events, header)

    try:
        version = _with_store(run)
    except (GameExists, ValueError) as e:
        typer.echo(f"not imported: {e}", err=True)
        raise typer.Exit(1) from None
    err_console.print(f"game {events[0].game_id}: imported {version} events")


T = TypeVar("T")


def _with_store(work: Callable[[EventStore], Awaitable[T]]) -> T:
    """Run ``work`` with the configured Redis and the archive in the configured database."""
    from services.lobby.db import make_engine
    from services.runtime import redis_for
    from shared.bus import Keys
    from shared.eventstore import Archive, EventStore

    settings = Settings()
    configure_logging("WARNING")
    keys = Keys(settings.key_prefix, settings.partitions)
    db = make_engine(settings.sql_url())

    async def run() -> T:
        async with redis_for(settings) as pools:
            return await work(EventStore(pools.client(), keys, archive=Archive(db)))

    try:
        return asyncio.run(run())
    finally:
        db.dispose()


def _list_games(as_json: bool) -> None:
    entries = api.catalog()
    if as_json:
        print(
            dump_json(
                [
                    {k: v for k, v in asdict(e).items() if k not in ("commands", "view")}
                    for e in entries
                ]
            )
        )
        return
    table = Table(title="games")
    for column in ("name", "title", "players", "rulesets", "bots"):
        table.add_column(column)
    for e in entries:
        players = f"{e.min_players}-{e.max_players}"
        table.add_row(e.name, e.title, players, ", ".join(e.rulesets), ", ".join(e.bot_levels))
    console.print(table)
    for e in entries:
        console.print(f"[bold]{e.name}[/bold] options (default first):")
        for line in _option_choices(e.options):
            console.print(f"  {line}")


def _option_choices(schema: dict[str, Any]) -> list[str]:
    """``key: a|b|c`` (the default first) for each option of an options JSON schema."""
    out = []
    for key, prop in schema.get("properties", {}).items():
        choices = prop.get("enum") or ([prop["const"]] if "const" in prop else [])
        out.append(f"{key}: {'|'.join(map(str, choices)) or prop.get('type', '?')}")
    return out


bench = typer.Typer(help="Benchmarks that print their figures.", no_args_is_help=True)
app.add_typer(bench, name="bench")


MIXED = "mixed"
"""``caravel bench pipeline --game mixed``: every registered game, in equal shares."""


@bench.command("pipeline")
def bench_pipeline(
    game_name: Annotated[
        str, typer.Option("--game", help=f"{GAME_HELP} `{MIXED}`: every game in equal shares.")
    ] = api.DEFAULT_GAME,
    games: Annotated[int, typer.Option(min=1, help="Concurrent games.")] = 200,
    players: Annotated[int, typer.Option(help="Seats per game (the game's range).")] = 4,
    seconds: Annotated[float, typer.Option(help="Measured seconds, after the warm-up.")] = 20.0,
    warmup: Annotated[
        float, typer.Option(help="Seconds over which games start; not measured.")
    ] = 3.0,
    engines: Annotated[
        int, typer.Option(min=0, help="Engine processes to start (0: one in this process).")
    ] = 1,
    partitions: Annotated[int, typer.Option(min=1)] = 64,
    seed: Annotated[int, typer.Option()] = 1,
    rate: Annotated[
        float, typer.Option(min=0, help="Commands/s to offer in all (0: as fast as possible).")
    ] = 0,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object last.")] = False,
) -> None:
    """Drive concurrent games of random legal commands through the real bus and engine."""
    from services.bench import pipeline
    from services.runtime import EmbeddedRedis

    kinds = [game_named(name) for name in (api.names() if game_name == MIXED else [game_name])]
    for game in kinds:
        check_players(game, players)
    settings = Settings()
    configure_logging("WARNING")

    async def run(url: str) -> dict[str, Any]:
        from shared.bus import connect

        redis = connect(url, max_connections=games + 64)
        try:
            return await pipeline(
                redis, url, games, players, seconds, engines, partitions, seed, rate, warmup, kinds
            )
        finally:
            await redis.aclose()

    embedded = (
        None
        if settings.redis_url
        else EmbeddedRedis(str(settings.data_dir), settings.embedded_fsync)
    )
    url = settings.redis_url or (embedded.url if embedded else "")
    try:
        with console.status(f"driving {games} games through the pipeline"):
            result = asyncio.run(run(url))
    finally:
        if embedded is not None:
            embedded.close()
    if as_json:
        print(dump_json(result))
        return
    latency = result["latency_ms"]
    console.print(
        f"{result['measured_commands']} commands in {result['measured_seconds']} s: "
        f"{result['commands_per_second']:.0f} commands/s, latency p50 {latency['p50']} ms, "
        f"p95 {latency['p95']} ms, p99 {latency['p99']} ms"
    )


@bench.command("capacity")
def bench_capacity(
    tables: Annotated[
        str, typer.Option(help="Numbers of concurrent tables to try, comma-separated.")
    ] = "50,100,200",
    seconds: Annotated[float, typer.Option(min=1, help="Measured time at each number.")] = 30,
    processes: Annotated[
        int | None, typer.Option(min=1, help="CARAVEL_PROCESSES of the server (unset: default).")
    ] = None,
    p99_ms: Annotated[float, typer.Option(help="The p99 move -> WebSocket allowed.")] = 100,
    setting: Annotated[
        list[str] | None,
        typer.Option(
            metavar="NAME=VALUE",
            help="A setting of the server, as CARAVEL_NAME (e.g. embedded_fsync=everysec); "
            "repeatable.",
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object last.")] = False,
) -> None:
    """Concurrent 4-seat tables at a human pace (think 2-10 s; one human seat over HTTP and
    its WebSocket, three greedy bots) on a fresh `caravel up` each: the largest number whose
    p99 move -> WebSocket stays within --p99-ms with no refused or lost move, and the memory
    per table and per open socket."""
    from services.capacity import capacity, parse_settings

    levels = [int(n) for n in tables.split(",") if n.strip()]
    try:
        settings = parse_settings(setting or [])
    except ValueError as error:
        raise typer.BadParameter(str(error), param_hint="--setting") from None
    result = capacity(levels, seconds, processes, p99_ms, settings=settings)
    if as_json:
        print(dump_json(result))
        return
    for run in result["runs"]:
        latency = run["latency_ms"] or {"p50": "-", "p99": "-"}
        console.print(
            f"{run['tables']} tables: {run['moves']} human moves, p50 {latency['p50']} ms, "
            f"p99 {latency['p99']} ms, refused {run['refused']}, lost {run['lost']}, "
            f"{run['memory_per_table_kb']} KB/table, {run['memory_per_socket_kb']} KB/socket"
        )
    console.print(f"largest within {p99_ms} ms: {result['largest_ok']} tables")


@app.command("arena")
def arena_command(
    seats: Annotated[
        str, typer.Option(help="Bot level per seat, comma-separated (random, greedy, mcts).")
    ] = "greedy,random,random,random",
    game_name: Annotated[str, typer.Option("--game", help=GAME_HELP)] = api.DEFAULT_GAME,
    games: Annotated[int, typer.Option(min=1)] = 200,
    seed: Annotated[int, typer.Option()] = 1,
    ruleset: Annotated[
        str | None,
        typer.Option(help="A shipped ruleset name or a .toml path (default: the game's)."),
    ] = None,
    option: Annotated[list[str] | None, typer.Option("--option", help="KEY=VALUE")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object last.")] = False,
    budget_ms: Annotated[
        int | None,
        typer.Option(min=1, help="Think time per decision of searching levels (mcts)."),
    ] = None,
) -> None:
    """Bots against each other, seats rotated across games: win rates with 95% intervals."""
    from services.ai.arena import arena

    game = game_named(game_name)
    levels = [s.strip() for s in seats.split(",") if s.strip()]
    known = api.bot_levels(game)
    unknown = [level for level in levels if level not in known]
    if unknown:
        raise typer.BadParameter(
            f"unknown levels {unknown}; known: {', '.join(known)}", param_hint="--seats"
        )
    check_players(game, len(levels))
    try:
        options = parse_options(option or [])
        game.rules(ruleset or game.default_ruleset, options)
    except api.RulesetError as e:
        raise typer.BadParameter(str(e)) from None
    with progress_bar(err_console if as_json else console) as progress:
        task = progress.add_task("arena", total=games)
        result = arena(
            levels,
            games,
            seed,
            game=game.name,
            options=options,
            ruleset=ruleset,
            progress=lambda: progress.advance(task),
            budget_s=None if budget_ms is None else budget_ms / 1000,
        )
    if as_json:
        print(dump_json(result))
        return
    table = Table(title=f"{games} games: {', '.join(levels)}")
    for column in ("level", "win rate", "95% CI", "mean score", "p50 ms", "p95 ms"):
        table.add_column(column, justify="right")
    for level, row in result["levels"].items():
        low, high = row["ci95"]
        table.add_row(
            level,
            f"{row['win_rate']:.1%}",
            f"{low:.1%} to {high:.1%}",
            f"{row['mean_score']:.1f}",
            f"{row['latency_ms']['p50']:.2f}",
            f"{row['latency_ms']['p95']:.2f}",
        )
    console.print(table)


@app.command()
def up() -> None:
    """Run every service: the engine, the bots, scoring, the views and the HTTP API on
    127.0.0.1:CARAVEL_HTTP_PORT (an embedded Redis unless CARAVEL_REDIS_URL is set), over
    CARAVEL_PROCESSES processes (default: one per core)."""
    from services.server import serve

    settings = Settings()
    configure_logging(settings.log_level)
    _run_server(serve(settings))


def _serve_alone(
    engine: bool = False,
    lobby: bool = False,
    ai: bool = False,
    scoring: bool = False,
    views: bool | None = None,
) -> None:
    """Run some services against the Redis that every process shares."""
    from services.server import serve

    settings = Settings()
    if not settings.redis_url:
        raise typer.BadParameter(
            "set CARAVEL_REDIS_URL to the Redis the services share (caravel up logs its own)"
        )
    configure_logging(settings.log_level)
    if settings.process_name:  # a child of `caravel up`: its lines told apart in the merge
        import structlog

        structlog.contextvars.bind_contextvars(process=settings.process_name)
    main = serve(settings, engine=engine, lobby=lobby, ai=ai, scoring=scoring, views=views)
    _run_server(main)


def _run_server(main: Coroutine[Any, Any, None]) -> None:
    """Run a server's ``main`` on uvloop; a service loop that died ends the process with
    exit code 1 and a log line naming it (:class:`services.server.LoopDied`), so that what
    started it starts it again. uvicorn picks its loop only in ``uvicorn.run``, not in the
    ``Server.serve`` this process awaits, so the lobby ran on asyncio's own loop: its socket
    writes and loop turns cost about a fifth more of its CPU there (benchmarks/README.md)."""
    import uvloop

    from services.server import LoopDied

    try:
        uvloop.run(main)
    except LoopDied as died:
        import structlog

        structlog.get_logger("caravel").error("a service loop died: exiting", loops=str(died))
        raise typer.Exit(1) from None


PARTS = ("engine", "lobby", "ai", "scoring", "views")


@app.command(hidden=True)
def part(services: str) -> None:
    """Run the services named (comma-separated: engine, lobby, ai, scoring, views) against
    CARAVEL_REDIS_URL: what `caravel up` starts in each of its child processes."""
    names = set(services.split(","))
    if not names <= set(PARTS):
        raise typer.BadParameter(f"services are some of {', '.join(PARTS)}")
    _serve_alone(**{name: name in names for name in PARTS})


@app.command()
def engine() -> None:
    """Run one engine instance alone against CARAVEL_REDIS_URL; several share the partitions."""
    _serve_alone(engine=True)


@app.command()
def lobby() -> None:
    """Run the HTTP API and the views projection alone against CARAVEL_REDIS_URL."""
    _serve_alone(lobby=True)


@app.command()
def ai() -> None:
    """Run a bot player alone against CARAVEL_REDIS_URL: it answers decision requests for bot
    seats, and for humans who left or ran out of time. Several share the load."""
    _serve_alone(ai=True)


@app.command()
def scoring() -> None:
    """Run the scoring service alone against CARAVEL_REDIS_URL: standings, results, ratings
    and analytics in CARAVEL_DATABASE_URL."""
    _serve_alone(scoring=True)


@app.command("asyncapi")
def asyncapi_command(
    write: Annotated[
        bool, typer.Option("--write", help="Write docs/asyncapi.yaml instead of printing.")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="JSON instead of YAML.")] = False,
) -> None:
    """The bus's AsyncAPI 3.0 document: its streams, their messages, who writes and reads."""
    from services.asyncapi import DOCUMENT, document, to_yaml

    doc = document()
    if write:
        DOCUMENT.write_text(to_yaml(doc))
        err_console.print(f"wrote {DOCUMENT}")
        return
    print(readable_json(doc) if as_json else to_yaml(doc), end="" if not as_json else "\n")


projections = typer.Typer(help="The SQL projections of the game logs.", no_args_is_help=True)
app.add_typer(projections, name="projections")


@projections.command("rebuild")
def projections_rebuild(
    name: Annotated[str, typer.Argument(help="The projection to rebuild.")] = "scoring",
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object last.")] = False,
) -> None:
    """Empty a projection and replay it from the game logs (stop its service first)."""
    from services.lobby.db import make_engine
    from services.runtime import redis_for
    from services.scoring.service import RebuildReport, ScoringService
    from shared.bus import Keys

    if name != "scoring":
        raise typer.BadParameter(f"unknown projection {name!r}; known: scoring")
    settings = Settings()
    configure_logging("WARNING")
    keys = Keys(settings.key_prefix, settings.partitions)

    async def run(progress: Progress) -> RebuildReport:
        async with redis_for(settings) as pools:
            redis = pools.client()
            scorer = ScoringService(redis, keys, make_engine(settings.sql_url()))
            registries = [k(p) for p in keys.all_partitions() for k in (keys.games, keys.archived)]
            total = sum([await redis.scard(registry) for registry in registries])
            task = progress.add_task(f"rebuilding {name}", total=total)
            return await scorer.rebuild(lambda games: progress.advance(task, games))

    with progress_bar(err_console if as_json else console) as progress:
        report = asyncio.run(run(progress))
    result = {
        "projection": name,
        "games": report.games,
        "events": report.events,
        "seconds": round(report.seconds, 3),
        "events_per_second": round(report.events_per_second, 1),
    }
    if as_json:
        print(dump_json(result))
        return
    console.print(
        f"{name}: {report.games} games, {report.events} events in {report.seconds:.1f} s: "
        f"{report.events_per_second:.0f} events/s"
    )


db_app = typer.Typer(help="The SQL schema: the lobby's and the scoring tables' migrations.")
app.add_typer(db_app, name="db")


def _migrations() -> list[Migrations]:
    from services.lobby.db import MIGRATIONS as LOBBY
    from services.scoring.db import MIGRATIONS as SCORING

    return [LOBBY, SCORING]


def _print_revisions(db: Engine, as_json: bool) -> None:
    from shared.sql import current

    revisions = {m.name: current(db, m) for m in _migrations()}
    if as_json:
        print(dump_json(revisions))
        return
    for name, revision in revisions.items():
        console.print(f"{name}: {revision or 'no tables yet'}")


@db_app.command("upgrade")
def db_upgrade(
    as_json: Annotated[bool, typer.Option("--json", help="Print the revisions as JSON.")] = False,
) -> None:
    """Upgrade the tables to the head revision (what each service does when it starts)."""
    from services.lobby.db import make_engine
    from shared.sql import migrate

    db = make_engine(Settings().sql_url())  # the lobby's tables migrated, a data folder made
    try:
        for migrations in _migrations():
            migrate(db, migrations)
        _print_revisions(db, as_json)
    finally:
        db.dispose()


@db_app.command("current")
def db_current(
    as_json: Annotated[bool, typer.Option("--json", help="Print the revisions as JSON.")] = False,
) -> None:
    """The revision each component's tables are at (changes nothing)."""
    from sqlalchemy import create_engine

    db = create_engine(Settings().sql_url())
    try:
        _print_revisions(db, as_json)
    finally:
        db.dispose()


app.add_typer(lab, name="lab")
app.add_typer(analytics_app, name="analytics")


if __name__ == "__main__":
    app()
