"""`caravel lab run`, `caravel lab compare` and `caravel analytics export` as a designer runs
them, on SQLite and PostgreSQL."""

from __future__ import annotations

import csv
import json
import os
from pathlib import Path

import pytest
from sqlalchemy import create_engine, select

from services.scoring import flat
from shared.games import analytics, api

from ..test_cli import caravel
from .helpers import exported_parquet

pytestmark = pytest.mark.every_database  # SQL semantics: SQLite and PostgreSQL


def test_two_lab_runs_compared_and_exported(database_url: str, tmp_path: Path) -> None:
    """Two runs of Navegador are recorded, compared with intervals (one line per figure),
    exported to Parquet that DuckDB reads and to CSV; a bad ruleset file writes nothing."""
    env = {**os.environ, "CARAVEL_DATABASE_URL": database_url}
    for name, seed in (("one", "1"), ("two", "500")):
        run = caravel(
            "lab", "run", "--game", "navegador", "--seats", "greedy,random,greedy",
            "--games", "6", "--experiment", name, "--seed", seed, "--workers", "2", "--json",
            env=env,
        )  # fmt: skip
        assert run.returncode == 0, run.stderr
        report = json.loads(run.stdout.strip().splitlines()[-1])
        assert (report["games"], report["status"]) == (6, "complete")
        assert report["games_per_cpu_second"] > 0

    compared = caravel("lab", "compare", "one", "two", "--json", env=env)
    assert compared.returncode == 0, compared.stderr
    result = json.loads(compared.stdout)
    assert result["games"] == [6, 6]
    assert [row["value"] for row in result["turn_position"]] == [0, 1, 2]
    assert {row["value"] for row in result["seat_kind"]} == {"bot:greedy", "bot:random"}
    for row in [*result["turn_position"], *result["means"].values(), *result["facts"]]:
        assert row["low"] <= row["diff"] <= row["high"]
    table = caravel("lab", "compare", "one", "two", env={**env, "COLUMNS": "200"})
    assert "win rate, turn position 0" in table.stdout and "95% interval" in table.stdout

    bad = tmp_path / "bad.toml"
    bad.write_text("name = 'bad'\nmin_players = 'many'\n")
    refused = caravel(
        "lab", "run", "--game", "navegador", "--ruleset", str(bad), "--experiment", "bad",
        env=env,
    )  # fmt: skip
    assert refused.returncode != 0 and "min_players" in refused.stderr
    unknown = caravel("lab", "compare", "one", "bad", env=env)
    assert unknown.returncode != 0 and "known: one, two" in unknown.stderr  # nothing written

    exported = exported_parquet(
        tmp_path / "export", "game, experiment", "--experiment", "two", env=env
    )
    assert exported == (18, [("navegador", "two", 18)])
    as_csv = caravel("analytics", "export", "--format", "csv", "-o", str(tmp_path / "c"), env=env)
    assert as_csv.returncode == 0, as_csv.stderr
    with (tmp_path / "c" / "results.csv").open() as f:
        assert len(list(csv.DictReader(f))) == 36


def test_compare_on_a_fresh_database_names_what_is_known(database_url: str) -> None:
    """A designer's first `lab compare`, before any run: a one-line answer that no
    experiment is known, not a SQL traceback about missing tables."""
    env = {**os.environ, "CARAVEL_DATABASE_URL": database_url}
    compared = caravel("lab", "compare", "one", "two", env=env)
    assert compared.returncode != 0
    assert "known: none" in compared.stderr and "Traceback" not in compared.stderr


def test_an_edited_ruleset_file_with_an_option_against_the_shipped_rules(
    database_url: str, tmp_path: Path
) -> None:
    """A designer's comparison of two rulesets: a run of an edited ruleset file with an
    option, another of the shipped rules; each is recorded under its rules' content hash
    (its experiment's row and its rows alike) and `lab compare` compares them."""
    env = {**os.environ, "CARAVEL_DATABASE_URL": database_url}
    game = api.get("age_of_discovery")
    standard = Path(analytics.__file__).parent / "age_of_discovery" / "rulesets" / "standard.toml"
    edited = tmp_path / "house.toml"
    edited.write_text(standard.read_text().replace("training_cost = 5", "training_cost = 6"))
    runs = {
        "house": ["--ruleset", str(edited), "--option", "factory_income=30"],
        "shipped": ["--ruleset", "standard"],
    }
    for name, extra in runs.items():
        run = caravel(
            "lab", "run", "--game", game.name, "--seats", "greedy,greedy,greedy,greedy",
            "--games", "2", "--experiment", name, "--workers", "1", "--json", *extra, env=env,
        )  # fmt: skip
        assert run.returncode == 0, run.stderr
    db = create_engine(database_url)
    try:
        with db.connect() as conn:
            e, r = flat.EXPERIMENTS.c, flat.RESULTS.c
            rows = conn.execute(select(e.name, e.ruleset_hash, e.options)).all()
            hashes = dict(conn.execute(select(r.experiment, r.ruleset_hash).distinct()).all())
    finally:
        db.dispose()
    found = {name: (ruleset_hash, json.loads(options)) for name, ruleset_hash, options in rows}
    shipped = analytics.ruleset_hash(game.rules("standard"))
    assert found["shipped"][0] == hashes["shipped"] == shipped
    assert found["house"][0] == hashes["house"] != shipped
    assert found["house"][1]["factory_income"] == 30  # as the games' rows have it
    compared = caravel("lab", "compare", "house", "shipped", "--json", env=env)
    assert compared.returncode == 0, compared.stderr
    assert json.loads(compared.stdout)["games"] == [2, 2]
