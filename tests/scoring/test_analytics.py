"""Analytics a designer can trust: the flat results table (projected and rebuilt, beside the
lab's experiments), the analytics API with its filters and intervals over real HTTP, the
lab and the exports, on SQLite and PostgreSQL."""

from __future__ import annotations

import csv
import io
import os
import re
import zipfile
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import duckdb
import pytest
from redis.asyncio import Redis
from sqlalchemy import Engine, func, select

from services.lab import LabError, LabRun, run_lab
from services.scoring import cells, export, flat, stats
from services.scoring.service import ScoringService
from shared.bus import Keys
from shared.eventstore import EventStore, export_log, import_log
from shared.games import analytics, api

from ..backbone.helpers import RULES
from ..lobby.helpers import running_lobby
from ..test_cli import caravel
from .helpers import dump, exported_parquet, game_ids, play_games
from .test_scoring import drain

pytestmark = pytest.mark.every_database  # SQL semantics: SQLite and PostgreSQL

AOD = "age_of_discovery"


def results(db: Engine, **where: Any) -> list[dict[str, Any]]:
    query = select(flat.RESULTS).order_by(flat.RESULTS.c.game_id, flat.RESULTS.c.seat)
    for column, value in where.items():
        query = query.where(flat.RESULTS.c[column] == value)
    with db.connect() as conn:
        return [dict(row._mapping) for row in conn.execute(query)]


def lab(db: Engine, name: str, games: int, **options: str) -> None:
    run = LabRun(AOD, ("greedy",) * 4, games, name, options=options, workers=1)
    report = run_lab(run, db)
    assert report.status == "complete" and report.games == games


async def test_the_flat_table_is_projected_rebuilt_and_keeps_the_lab(
    redis: Redis, keys: Keys, database: Engine, tmp_path: Path
) -> None:
    """A finished game has one row per seat: its place and breakdown as the rules score
    them, the turn order of its first decision, the seats' kinds, the rules' content hash;
    a rebuild writes the same rows again and keeps a lab experiment's; a ruleset file the
    game refuses is refused naming the field, with nothing written."""
    done, running = game_ids(keys, 2, "g-flat")
    seats = {done: {"0": "human", "1": "bot:greedy", "2": "bot:random", "3": "human"}}
    played = await play_games(redis, keys, [(done, 4, 5, None), (running, 3, 6, 30)], seats)
    await drain(ScoringService(redis, keys, database))
    rows = results(database)
    assert [r["game_id"] for r in rows] == [done] * 4  # the running game has none yet
    game = api.get(AOD)
    first, _ = game.new_game(RULES, 4, 5)  # the state at the game's first decision
    final = played[done][1]
    scored = {r.seat: r for r in game.results(final)}
    for row in rows:
        seat = row["seat"]
        assert row["turn_position"] == game.turn_positions(first)[seat]
        assert row["seat_kind"] == ["human", "bot:greedy", "bot:random", "human"][seat]
        assert (row["place"], row["total"], row["side"]) == (
            scored[seat].place,
            scored[seat].total,
            scored[seat].side,
        )
        assert row["won"] == (scored[seat].place == 1)
        assert {p: row[f"score_{p}"] for p in scored[seat].breakdown} == scored[seat].breakdown
        assert row["score_workers"] is None  # another game's column
        assert row["ruleset_hash"] == analytics.ruleset_hash(RULES)
        assert (row["players"], row["humans"], row["experiment"]) == (4, 2, None)
        assert row["caravel_version"] == flat.caravel_version()
    assert sorted(r["turn_position"] for r in rows) == [0, 1, 2, 3]

    lab(database, "kept", 3)
    before = dump(database)
    await ScoringService(redis, keys, database).rebuild()
    assert dump(database) == before  # projected rows again, and the lab's kept
    assert len(results(database, experiment="kept")) == 12

    bad = tmp_path / "bad.toml"
    bad.write_text("name = 'bad'\nmin_players = 'many'\n")
    with pytest.raises(LabError, match="min_players"):
        run_lab(LabRun(AOD, ("greedy",) * 4, 2, "bad", ruleset=str(bad), workers=1), database)
    with database.connect() as conn:
        names = conn.execute(select(flat.EXPERIMENTS.c.name)).scalars().all()
        count = conn.execute(select(func.count()).select_from(flat.RESULTS)).scalar_one()
    assert names == ["kept"] and count == 16
    with pytest.raises(LabError, match="exists"):
        lab(database, "kept", 1)


def test_a_lab_run_that_stops_is_marked_incomplete(database: Engine) -> None:
    """A run stopped after its first chunk keeps what it wrote, counted, as incomplete."""

    def stop(count: int) -> None:
        raise KeyboardInterrupt

    run = LabRun(AOD, ("greedy", "random", "greedy"), 60, "cut", workers=1)
    with pytest.raises(KeyboardInterrupt):
        run_lab(run, database, progress=stop)
    with database.connect() as conn:
        row = conn.execute(select(flat.EXPERIMENTS)).one()
    assert (row.status, row.games_recorded) == ("incomplete", 50)
    rows = results(database, experiment="cut")
    assert len(rows) == 150 and {r["seat_kind"] for r in rows} == {"bot:greedy", "bot:random"}
    assert {r["players"] for r in rows} == {3}
    assert seats_in_cells(database, "cut") == 150  # its figures: what it recorded


def seats_in_cells(db: Engine, experiment: str) -> int:
    c = cells.CELLS.c
    query = select(func.coalesce(func.sum(c.n), 0)).where(
        c.experiment == experiment, c.dim == "players"
    )
    with db.connect() as conn:
        return int(conn.execute(query).scalar_one())


def test_a_running_experiment_shows_its_games_as_they_are_recorded(database: Engine) -> None:
    """The cells (what the page draws) count a run's games while it plays, not only at
    its end; the experiment says it is running until then."""
    seen: list[tuple[str, int]] = []

    def look(count: int) -> None:
        with database.connect() as conn:
            status = conn.execute(select(flat.EXPERIMENTS.c.status)).scalar_one()
        seen.append((status, seats_in_cells(database, "live")))

    run = LabRun(AOD, ("greedy",) * 3, 120, "live", workers=1)
    report = run_lab(run, database, progress=look, refresh_s=0)
    assert seen == [("running", 150), ("running", 300), ("running", 360)]
    assert report.status == "complete" and seats_in_cells(database, "live") == 360


def check_rate(figure: dict[str, Any]) -> None:
    assert 0 <= figure["low"] <= figure["rate"] <= figure["high"] <= 1
    assert figure["n"] >= figure["wins"] >= 0


async def test_the_analytics_api_filters_intervals_comparisons_and_exports(
    redis_url: str, keys: Keys, database_url: str, database: Engine, tmp_path: Path
) -> None:
    """Two lab experiments (Factory income 25 and 30): figures carry n and 95% intervals,
    filters change them, bad filters are refused naming the allowed values, an A/B
    comparison has a difference with its interval, and the exports open in DuckDB."""
    lab(database, "f25", 6, factory_income="25")
    lab(database, "f30", 4, factory_income="30")
    async with running_lobby(redis_url, keys, database_url, tmp_path / "up") as client:
        every = (await client.get("/analytics/figures", params={"game": AOD})).json()
        assert (every["games"], every["seats"]) == (10, 40)
        assert [p["value"] for p in every["turn_position"]] == [0, 1, 2, 3]
        for position in every["turn_position"]:
            check_rate(position)
            assert position["n"] == 10 and position["expected"] == pytest.approx(0.25)
            assert isinstance(position["significant"], bool)
        assert {s["value"] for s in every["side"]} == {"England", "France", "Spain", "Portugal"}
        means = every["means"]
        assert set(means) == {
            "total",
            "colonies",
            "discoveries",
            "buildings",
            "economy",
            "decisions",
        }
        assert means["total"]["low"] <= means["total"]["mean"] <= means["total"]["high"]
        assert every["facts"], "greedy bots buy buildings"
        for lift in every["facts"]:
            check_rate(lift["owners"])
            assert lift["owners"]["n"] + lift["rest"]["n"] == 40
            assert lift["lift"]["low"] <= lift["lift"]["diff"] <= lift["lift"]["high"]

        # A period off the hour is summed from the flat table, not the cells: same figures
        odd = {"game": AOD, "since": "2000-01-01T00:00:01+00:00"}
        exact = (await client.get("/analytics/figures", params=odd)).json()
        assert {**exact, "filter": None} == {**every, "filter": None}
        future = {"game": AOD, "since": "2100-01-01T00:00:00+00:00"}
        assert (await client.get("/analytics/figures", params=future)).json()["games"] == 0

        thirty = await client.get(
            "/analytics/figures", params={"game": AOD, "option": "factory_income=30"}
        )
        assert thirty.json()["games"] == 4
        named = await client.get("/analytics/figures", params={"game": AOD, "experiment": "f25"})
        assert named.json()["games"] == 6
        humans = await client.get("/analytics/figures", params={"game": AOD, "seats": "humans"})
        assert humans.json()["games"] == 0 and humans.json()["turn_position"] == []
        hashed = await client.get(
            "/analytics/figures",
            params={"game": AOD, "ruleset": analytics.ruleset_hash(api.get(AOD).rules("standard"))},
        )
        assert hashed.json()["games"] == 6  # factory_income=25 is the default rules

        for params, field, allowed in (
            ({"game": "chess"}, "game", AOD),
            ({"game": AOD, "option": "factory_income=99"}, "options", 30),
            ({"game": AOD, "option": "speed=fast"}, "options", "factory_income"),
            ({"game": AOD, "seat_kind": "robot"}, "seat_kind", "bot:greedy"),
            ({"game": AOD, "experiment": "nope"}, "experiment", "f30"),
            ({"game": AOD, "players": 9}, "players", 5),
            ({"game": AOD, "ruleset": "deluxe"}, "ruleset", "standard"),
            ({"game": AOD, "imported": "maybe"}, "imported", "only"),
        ):
            bad = await client.get("/analytics/figures", params=params)
            assert bad.status_code == 422, params
            assert bad.json()["code"] == "bad_filter"
            assert bad.json()["details"]["field"] == field
            assert allowed in bad.json()["details"]["allowed"]

        ab = await client.get(
            "/analytics/compare",
            params={"a": f"game={AOD}&experiment=f25", "b": f"game={AOD}&experiment=f30"},
        )
        compared = ab.json()
        assert compared["games"] == [6, 4]
        assert [row["value"] for row in compared["turn_position"]] == [0, 1, 2, 3]
        family = [*compared["turn_position"], *compared["means"].values()]
        for row in family:
            assert row["low"] <= row["diff"] <= row["high"]
            assert row["p_value"] <= row["p_adjusted"] <= 1
            assert row["significant"] == (row["p_adjusted"] < 0.05)
        assert compared["correction"]["method"] == "holm"
        assert compared["correction"]["tests"] >= len(family)
        refused = await client.get("/analytics/compare", params={"a": "colour=red", "b": ""})
        assert refused.status_code == 422 and refused.json()["details"]["field"] == "a"

        choices = (await client.get("/analytics/filters", params={"game": AOD})).json()
        assert {e["name"] for e in choices["experiments"]} == {"f25", "f30"}
        assert choices["options"]["factory_income"] == [25, 30]
        labels = (await client.get("/analytics/labels", params={"game": AOD})).json()
        assert labels["subjects"]["rio_de_la_plata"] == "Rio de la Plata"

        parquet = await client.get(
            "/analytics/export", params={"format": "parquet", "experiment": "f30"}
        )
        assert parquet.headers["content-type"] == "application/zip"
        zipfile.ZipFile(io.BytesIO(parquet.content)).extractall(tmp_path / "parquet")
        found = duckdb.sql(
            f"SELECT game, count(*), count(DISTINCT game_id), sum(won::INT) >= 4 "
            f"FROM read_parquet('{tmp_path}/parquet/results/*/*/*.parquet', "
            "hive_partitioning = true) GROUP BY game"
        ).fetchall()
        assert found == [(AOD, 16, 4, True)]
        csv = await client.get("/analytics/export", params={"format": "csv", "game": AOD})
        files = zipfile.ZipFile(io.BytesIO(csv.content))
        assert sorted(files.namelist()) == ["facts.csv", "results.csv"]
        lines = files.read("results.csv").decode().splitlines()
        assert len(lines) == 41 and "turn_position" in lines[0] and "secret" not in lines[0]
        wrong = await client.get("/analytics/export", params={"format": "xml"})
        assert wrong.status_code == 422 and wrong.json()["details"]["allowed"] == [
            "parquet",
            "csv",
        ]


def test_the_ruleset_hash_follows_the_content_not_the_name(tmp_path: Path) -> None:
    """The shipped board given as a file hashes as the shipped name does; an edited value
    or another option hashes differently; labels name the board's ids."""
    game = api.get(AOD)
    standard = Path(analytics.__file__).parent / "age_of_discovery" / "rulesets" / "standard.toml"
    copy = tmp_path / "mine.toml"
    copy.write_text(standard.read_text())
    named = analytics.ruleset_hash(game.rules("standard"))
    assert analytics.ruleset_hash(game.rules(str(copy))) == named
    assert analytics.ruleset_hash(game.rules("standard", {"factory_income": 30})) != named
    edited = tmp_path / "edited.toml"  # another path: the game caches rules by path
    edited.write_text(standard.read_text().replace("training_cost = 5", "training_cost = 6"))
    assert analytics.ruleset_hash(game.rules(str(edited))) != named
    assert analytics.labels(game)["subjects"]["indentured_servitude"] == "Indentured Servitude"


def test_holm_marks_fewer_differences_than_each_at_five_percent() -> None:
    """Four differences each under 5%: after Holm-Bonferroni only the two smallest stay
    significant (p 0.005 x 4 = 0.02, 0.01 x 3 = 0.03; 0.03 x 2 = 0.06 and then 0.06)."""
    rows: list[dict[str, Any]] = [{"p_value": p} for p in (0.01, 0.04, 0.03, 0.005)]
    stats.holm(rows)
    assert [round(r["p_adjusted"], 6) for r in rows] == [0.03, 0.06, 0.06, 0.02]
    assert [r["significant"] for r in rows] == [True, False, False, True]


def test_the_parquet_export_holds_every_value_as_stored(database: Engine, tmp_path: Path) -> None:
    """Every column of every row comes out of a Parquet export as the database holds it:
    texts with commas, quotes and a line break, empty texts, NULLs, floats to the last
    digit, booleans and UTC times; rows outside the filters stay out."""
    lab(database, "values", 3)
    lab(database, "other", 1)
    tricky = 'Ana, "the Navigator"\nof Lisbon'
    with database.begin() as conn:
        conn.execute(
            flat.RESULTS.update()
            .where(flat.RESULTS.c.seat == 0, flat.RESULTS.c.experiment == "values")
            .values(player=tricky, side="", duration_s=0.1 + 0.2, score_workers=None)
        )
    out = tmp_path / "export"
    counts = export.write_parquet(database, export.Scope(AOD, experiment="values"), out, 1)
    assert (counts["results"], counts["facts"]) == (12, len(facts(database, "values")))
    read = duckdb.sql(
        f"SELECT * EXCLUDE (month) FROM read_parquet('{out}/results/*/*/*.parquet', "
        "hive_partitioning = true) ORDER BY game_id, seat"
    )
    exported = [dict(zip(read.columns, row, strict=True)) for row in read.fetchall()]
    stored = results(database, experiment="values")
    for row in stored:
        row["finished_at"] = utc(row["finished_at"])
    for row in exported:
        row["finished_at"] = utc(row["finished_at"])
    assert exported == stored
    assert exported[0]["player"] == tricky and exported[0]["duration_s"] == 0.1 + 0.2
    read = duckdb.sql(
        f"SELECT game_id, seat, kind, subject, count, value FROM read_parquet("
        f"'{out}/facts/*/*/*.parquet', hive_partitioning = true) ORDER BY ALL"
    )
    assert read.fetchall() == facts(database, "values")
    empty = export.write_parquet(database, export.Scope(AOD, experiment="none"), tmp_path / "e")
    assert (empty["results"], empty["facts"]) == (0, 0)


def facts(db: Engine, experiment: str) -> list[tuple[Any, ...]]:
    f = flat.SEAT_FACTS.c
    query = select(f.game_id, f.seat, f.kind, f.subject, f.count, f.value).order_by(
        f.game_id, f.seat, f.kind, f.subject
    )
    with db.connect() as conn:
        return [tuple(r) for r in conn.execute(query.where(f.experiment == experiment))]


def utc(moment: datetime) -> datetime:
    """A time as UTC (SQLite gives it back without its zone)."""
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def summed(rows: stats.Sums) -> dict[tuple[Any, ...], list[int]]:
    out: dict[tuple[Any, ...], list[int]] = {}
    for players, dim, value, *numbers in rows:
        held = out.setdefault((players, dim, value), [0, 0, 0, 0])
        for i, number in enumerate(numbers):
            held[i] += int(number)
    return out


def test_a_period_off_the_hour_sums_as_the_flat_table_does(database: Engine) -> None:
    """A period with minutes, seconds or microseconds (whole hours from the hourly cells,
    whole minutes and seconds of its ends from the finer cells, under a second from the
    flat table) gives the sums the flat table alone gives, for periods across hours, open
    at one end, within one hour, minute or second, and on the hour; cells summed again
    group by group equal those summed at once."""
    lab(database, "spread", 8)
    start = datetime(2026, 1, 1, 10, 0, tzinfo=UTC)
    ids = sorted({r["game_id"] for r in results(database, experiment="spread")})
    moments = [
        start + timedelta(minutes=25 * k, seconds=7 * k, microseconds=250_000 * (k % 4))
        for k in range(8)
    ]
    moments[4] += timedelta(microseconds=250_000)
    moments[5] = moments[4] + timedelta(microseconds=400_000)  # three games in one second
    moments[6] = moments[4] + timedelta(microseconds=600_000)
    second = moments[4].replace(microsecond=0)
    with database.begin() as conn:
        for game_id, moment in zip(ids, moments, strict=True):
            values = {"finished_at": moment, "finished_hour": moment.strftime(flat.HOUR)}
            for table in (flat.RESULTS, flat.SEAT_FACTS):
                conn.execute(table.update().where(table.c.game_id == game_id).values(values))
        for table in (cells.CELLS, cells.FINE):
            conn.execute(table.delete().where(table.c.experiment == "spread"))
        cells.refresh_all(conn, "spread")
    at = lambda h, m, s=0, us=0: start.replace(hour=h, minute=m, second=s, microsecond=us)  # noqa: E731
    periods = [
        (at(10, 10), at(12, 50)),
        (at(10, 10), None),
        (None, at(11, 30)),
        (at(10, 5), at(10, 40)),
        (at(11, 0), at(12, 0)),
        (at(10, 25, 3), at(11, 40, 30)),  # ends inside minutes, across hours
        (moments[1], moments[7]),  # ends inside seconds
        (moments[1] + timedelta(microseconds=1), moments[7] + timedelta(microseconds=1)),
        (moments[4], moments[5]),  # within one second
        (moments[4] - timedelta(seconds=30), moments[5] + timedelta(microseconds=1)),
        # ends inside the second of three games: its cells less the games left out
        (second + timedelta(microseconds=1), None),
        (moments[4] + timedelta(microseconds=1), moments[7]),
        (None, moments[6]),
        (moments[0], moments[6] + timedelta(microseconds=1)),
        (at(11, 40, 5, 500_000), None),
        (None, at(12, 55, 35, 1)),
    ]
    with database.connect() as conn:
        for since, until in periods:
            f = stats.Filter(AOD, experiment="spread", since=since, until=until)
            expected = summed(stats._flat_sums(conn, f))
            assert summed(stats.sums(conn, f)) == expected, (since, until)
            games = sum(n for (_, dim, _), (n, *_) in expected.items() if dim == "position") // 4
            inside = [
                m for m in moments if (since is None or since <= m) and (until is None or m < until)
            ]
            assert games == len(inside) > 0, (since, until)
        grains = conn.execute(select(cells.FINE.c.grain).distinct()).scalars().all()
        assert sorted(grains) == ["minute", "second"]
        held = {t: sorted(map(tuple, conn.execute(select(t)))) for t in (cells.CELLS, cells.FINE)}
    with database.begin() as conn:
        groups = cells.stored_groups(conn, ids)
        assert len(groups) == 6  # one second holds three games
        cells.refresh(conn, groups)
        again = {t: sorted(map(tuple, conn.execute(select(t)))) for t in (cells.CELLS, cells.FINE)}
    assert again == held


async def test_an_imported_game_is_marked_and_left_out_unless_asked_for(
    redis: Redis, keys: Keys, database: Engine
) -> None:
    """A game loaded by `caravel games import` (its log exported and imported under
    another id) is projected with ``imported`` set; the figures leave it out by default,
    count it with ``include`` and alone with ``only``; an unknown choice is refused."""
    played, imported = game_ids(keys, 2, "g-imp")
    await play_games(redis, keys, [(played, 4, 5, None)])
    store = EventStore(redis, keys)
    log = await export_log(store, played)
    copied = [e.model_copy(update={"game_id": imported}) for e in log]
    assert await import_log(store, copied) == len(log)
    await drain(ScoringService(redis, keys, database))
    marked = {r["game_id"]: r["imported"] for r in results(database)}
    assert marked == {played: False, imported: True}
    with database.connect() as conn:
        for choice, games in (("exclude", 1), ("include", 2), ("only", 1)):
            f = stats.check(conn, stats.Filter(AOD, imported=choice))
            assert stats.figures(conn, f)["games"] == games, choice
        only = stats.figures(conn, stats.Filter(AOD, imported="only"))
        assert only["overall"]["n"] == 4
        with pytest.raises(stats.BadFilter, match="imported"):
            stats.check(conn, stats.Filter(AOD, imported="maybe"))


def in_zone(database_url: str) -> str:
    """The URL with PostgreSQL sessions in UTC+14: a time without an offset would be read
    as Kiritimati's there, not as UTC as the tables hold (SQLite: the URL as it is)."""
    if not database_url.startswith("postgresql"):
        return database_url
    return f"{database_url}%20-ctimezone%3DPacific%2FKiritimati"


def csv_rows(body: bytes, name: str) -> tuple[list[str], list[dict[str, str]]]:
    """The header and rows of one CSV file of an export's zip (an empty file: none)."""
    text = zipfile.ZipFile(io.BytesIO(body)).read(name).decode()
    reader = csv.DictReader(io.StringIO(text))
    rows = list(reader)
    return list(reader.fieldnames or []), rows


async def test_the_exports_keep_their_period_game_and_experiment_and_no_secret(
    redis_url: str, keys: Keys, database_url: str, database: Engine, tmp_path: Path
) -> None:
    """`GET /analytics/export` and `caravel analytics export` keep the games of their
    period (a time with an offset or without one, taken as UTC, also from PostgreSQL
    sessions in another zone), game and experiment; every column exported is one of the
    flat table's or the seat facts' (no other: nothing of a log, no secret)."""
    lab(database, "old", 2)
    lab(database, "new", 3)
    moment = datetime(2025, 3, 15, 12, 0, tzinfo=UTC)
    with database.begin() as conn:
        values = {"finished_at": moment, "finished_hour": moment.strftime(flat.HOUR)}
        for table in (flat.RESULTS, flat.SEAT_FACTS):
            conn.execute(table.update().where(table.c.experiment == "old").values(values))
        conn.execute(cells.CELLS.delete().where(cells.CELLS.c.experiment == "old"))
        cells.refresh_all(conn, "old")
    url = in_zone(database_url)
    result_columns = [c.name for c in flat.RESULTS.columns]
    fact_columns = [c.name for c in flat.SEAT_FACTS.columns]
    wanted: list[tuple[dict[str, str], dict[str, int]]] = [
        ({"until": "2026-01-01T00:00:00"}, {"old": 8}),
        ({"since": "2026-01-01T00:00:00"}, {"new": 12}),
        ({"since": "2025-03-15T11:30:00", "until": "2025-03-15T12:30:00"}, {"old": 8}),
        ({"since": "2025-03-15T13:30:00+02:00", "until": "2025-03-15T14:30:00+02:00"}, {"old": 8}),
        ({"since": "2025-03-15T12:30:00+00:00"}, {"new": 12}),
        ({"game": AOD, "experiment": "new"}, {"new": 12}),
        ({"game": "navegador"}, {}),
    ]
    async with running_lobby(redis_url, keys, url, tmp_path / "up") as client:
        for params, kept in wanted:
            answer = await client.get("/analytics/export", params={"format": "csv", **params})
            assert answer.status_code == 200, (params, answer.text)
            header, rows = csv_rows(answer.content, "results.csv")
            found: dict[str, int] = {}
            for row in rows:
                found[row["experiment"]] = found.get(row["experiment"], 0) + 1
            assert found == kept, params
            if rows:
                assert header == [*result_columns, "month"], params  # month: "YYYY-MM"
                facts_header, facts = csv_rows(answer.content, "facts.csv")
                assert facts and facts_header == [*fact_columns, "month"], params
                assert {f["game_id"] for f in facts} <= {r["game_id"] for r in rows}
        parquet = await client.get(
            "/analytics/export", params={"format": "parquet", "until": "2026-01-01T00:00:00"}
        )
        assert parquet.status_code == 200, parquet.text
        names = zipfile.ZipFile(io.BytesIO(parquet.content)).namelist()
        assert names and all(f"/game={AOD}/month=2025-03/" in name for name in names), names

    env = {**os.environ, "CARAVEL_DATABASE_URL": url}
    since, until = "2025-03-15T13:30:00+0200", "2025-03-15T14:30:00+0200"  # 11:30 to 12:30 UTC
    scope = ("--game", AOD, "--since", since, "--until", until)
    exported = exported_parquet(tmp_path / "cli", "experiment, month", *scope, env=env)
    assert exported == (8, [("old", "2025-03", 8)])
    as_csv = caravel(
        "analytics", "export", "--format", "csv", "-o", str(tmp_path / "c"), "--since",
        "2026-01-01", env=env,
    )  # fmt: skip
    assert as_csv.returncode == 0, as_csv.stderr
    with (tmp_path / "c" / "results.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 12 and {r["experiment"] for r in rows} == {"new"}


def test_a_turn_position_that_wins_too_often_is_flagged(database: Engine) -> None:
    """Win rate by turn position against 1/n: the first player winning all 24 games is
    flagged (and the others, who never win); the same games with the win going round the
    positions flag none. The seat filters keep or drop those games as they should."""
    lab(database, "skew", 24)
    ids = sorted({r["game_id"] for r in results(database, experiment="skew")})
    c = flat.RESULTS.c

    def figures_when(winner: Callable[[int], int]) -> dict[str, Any]:
        with database.begin() as conn:
            for k, game_id in enumerate(ids):
                won = c.turn_position == winner(k)
                conn.execute(flat.RESULTS.update().where(c.game_id == game_id).values(won=won))
            conn.execute(cells.CELLS.delete().where(cells.CELLS.c.experiment == "skew"))
            cells.refresh_all(conn, "skew")
        with database.connect() as conn:
            return stats.figures(conn, stats.check(conn, stats.Filter(AOD, experiment="skew")))

    first = figures_when(lambda k: 0)
    flagged = [(p["value"], p["wins"], p["significant"]) for p in first["turn_position"]]
    assert flagged == [(0, 24, True), (1, 0, True), (2, 0, True), (3, 0, True)]
    assert all(p["expected"] == pytest.approx(0.25) for p in first["turn_position"])
    fair = figures_when(lambda k: k % 4)
    assert [(p["wins"], p["significant"]) for p in fair["turn_position"]] == [(6, False)] * 4

    with database.connect() as conn:
        for kept, games in (
            ({"players": 4}, 24),
            ({"players": 3}, 0),
            ({"seat_kind": "bot:greedy"}, 24),
            ({"seat_kind": "human"}, 0),
            ({"seats": "bots"}, 24),
            ({"seats": "humans"}, 0),
            ({"until": datetime(2000, 1, 1, tzinfo=UTC)}, 0),
        ):
            f = stats.check(conn, stats.Filter(AOD, experiment="skew", **kept))
            assert stats.figures(conn, f)["games"] == games, kept


README = Path(__file__).parents[2] / "README.md"


def test_the_readme_documents_every_column_of_the_flat_table() -> None:
    """The README's table of ``analytics_results`` names each column once (the breakdown
    columns as ``score_<part>``), and no column the table lacks."""
    text = README.read_text()
    table = text[text.index("| column | what |") :].split("\n\n", 1)[0]
    documented: list[str] = []
    for line in table.splitlines()[2:]:
        documented += re.findall(r"`([a-z_<>]+)`", line.split("|")[1])
    columns = [c.name for c in flat.RESULTS.columns]
    expected = [c for c in columns if not c.startswith(flat.SCORE_PREFIX)]
    assert sorted(documented) == sorted([*expected, f"{flat.SCORE_PREFIX}<part>"])


def test_the_readmes_duckdb_queries_answer_on_an_export(
    database: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The README's DuckDB queries, run as written in the directory of an export: turn
    positions, and the win rates of the owners of buildings, each with rows."""
    lab(database, "readme", 3)
    export.write_parquet(database, export.Scope(), tmp_path / "export", 1)
    queries = re.findall(r'duckdb\.sql\("""(.*?)"""\)', README.read_text(), re.DOTALL)
    assert len(queries) == 2
    monkeypatch.chdir(tmp_path)
    positions, buildings = (duckdb.sql(query).fetchall() for query in queries)
    assert {row[2] for row in positions} == {0, 1, 2, 3} and sum(r[3] for r in positions) == 12
    assert buildings and all(0 <= row[2] <= 1 for row in buildings)
