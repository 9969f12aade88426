"""`caravel lab run --live`: games played by the real engine, bot player and scoring (in
this process, on real Redis and real SQL), recorded under the experiment and compared."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from redis.asyncio import Redis
from sqlalchemy import Engine, MetaData, create_engine, inspect, select

from services.ai.service import BotPlayer
from services.lab import LabError, LabRun, run_lab
from services.lab_live import run_live
from services.lobby.views import ViewProjector
from services.scoring import flat
from services.scoring.cells import CELLS
from services.scoring.service import ScoringService
from shared.bus import Keys
from shared.contracts import Seats
from shared.games import navegador

from ..backbone.helpers import running_engine, settings_for
from ..lobby.helpers import caravel_env, running_lobby
from ..test_cli import caravel
from .helpers import dump

pytestmark = pytest.mark.every_database  # SQL semantics: SQLite and PostgreSQL

RUN = LabRun("navegador", ("greedy", "random", "greedy"), 3, "live-one", seed=7)


@asynccontextmanager
async def pipeline(redis: Redis, keys: Keys, db: Engine) -> AsyncIterator[None]:
    """The engine, the views projection, the bot player and scoring, as `caravel up` runs them."""
    stop = asyncio.Event()
    projector = ViewProjector(redis, keys)
    player = BotPlayer(redis, keys, settings_for(keys, bot_think_ms=0))
    scoring = ScoringService(redis, keys, db, commit_interval_s=0.05)
    async with running_engine(redis, keys):
        tasks = [asyncio.create_task(projector.run(stop)), asyncio.create_task(player.run(stop))]
        await scoring.start()
        try:
            yield
        finally:
            await scoring.close()
            stop.set()
            await asyncio.gather(*tasks)


def test_the_seats_hash_carries_the_experiment() -> None:
    seats = Seats({0: "bot:greedy"}, experiment="x", experiment_games=12)
    assert Seats.from_hash(seats.to_mapping()) == seats  # type: ignore[arg-type]
    assert seats.to_mapping()["experiment_games"] == "12"
    assert "experiment" not in Seats({0: "human"}).to_mapping()
    assert "experiment_games" not in Seats({0: "human"}).to_mapping()


async def test_a_live_run_is_recorded_under_its_experiment_and_compared(
    redis: Redis, keys: Keys, database: Engine, database_url: str
) -> None:
    """Three games through the pipeline: every flat row and cell carries the experiment, the
    run is complete, a rebuild writes the same rows, and `lab compare` sees the games."""
    with pytest.raises(LabError, match="letters, digits"):  # refused before anything is written
        await run_live(LabRun("navegador", ("greedy",) * 3, 1, "a b"), database, redis, keys)
    seen: list[int] = []
    async with pipeline(redis, keys, database):
        report = await run_live(RUN, database, redis, keys, seen.append, stall_s=60)
    assert (report.games, report.status, sum(seen)) == (3, "complete", 3)
    with database.connect() as conn:
        c = flat.RESULTS.c
        rows = conn.execute(select(c.game_id, c.experiment, c.seat_kind)).all()
        cells = conn.execute(select(CELLS.c.experiment).distinct()).scalars().all()
        status = conn.execute(
            select(flat.EXPERIMENTS.c.status, flat.EXPERIMENTS.c.games_recorded)
        ).one()
    assert len(rows) == 9 and {r.experiment for r in rows} == {"live-one"}
    assert {r.game_id for r in rows} == {f"live-live-one-{i:07d}" for i in range(3)}
    assert {r.seat_kind for r in rows} == {"bot:greedy", "bot:random"}
    assert cells == ["live-one"] and tuple(status) == ("complete", 3)

    before = dump(database)
    await ScoringService(redis, keys, database).rebuild()
    assert dump(database) == before  # the experiment comes from the seats hash again

    await asyncio.to_thread(
        run_lab, LabRun("navegador", RUN.seats, 3, "here", workers=1), database, None, 0
    )
    env = {**os.environ, "CARAVEL_DATABASE_URL": database_url}
    argv = ("lab", "compare", "live-one", "here", "--json")
    compared = await asyncio.to_thread(caravel, *argv, env=env)
    assert compared.returncode == 0, compared.stderr
    result = json.loads(compared.stdout)
    assert result["games"] == [3, 3]
    assert {row["value"] for row in result["seat_kind"]} == {"bot:greedy", "bot:random"}


def wipe(db: Engine) -> None:
    """Lose the whole SQL database: every table dropped (the lobby's, the archive's, the
    scoring ones and their revisions)."""
    tables = MetaData()
    tables.reflect(db)
    tables.drop_all(db)
    assert inspect(db).get_table_names() == []


def experiment_rows(db: Engine) -> dict[str, dict[str, Any]]:
    with db.connect() as conn:
        return {r.name: dict(r._mapping) for r in conn.execute(select(flat.EXPERIMENTS))}


async def test_a_live_runs_experiment_is_rebuilt_after_sql_is_lost(
    redis: Redis, redis_url: str, keys: Keys, database: Engine, database_url: str, tmp_path: Path
) -> None:
    """The whole database lost after a live run: `caravel projections rebuild` writes the
    experiment's row again from its games' logs and seats hashes (the run's plan), so
    `lab compare` and the experiments API know it with its games."""
    run = LabRun("navegador", ("greedy", "random", "greedy"), 2, "lost-one", seed=3)
    async with pipeline(redis, keys, database):
        report = await run_live(run, database, redis, keys, stall_s=60)
    assert (report.games, report.status) == (2, "complete")
    original = experiment_rows(database)["lost-one"]
    with database.connect() as conn:
        c = flat.RESULTS.c
        rows = conn.execute(select(flat.RESULTS).order_by(c.game_id, c.seat)).all()

    wipe(database)
    data = str(tmp_path / "data")
    env = caravel_env(redis_url, keys, database_url=database_url, data_dir=data)
    rebuilt = await asyncio.to_thread(caravel, "projections", "rebuild", "--json", env=env)
    assert rebuilt.returncode == 0, rebuilt.stderr
    assert json.loads(rebuilt.stdout.splitlines()[-1])["games"] == 2

    restored = experiment_rows(database)["lost-one"]
    timeless = ("started_at", "finished_at")
    assert {k: v for k, v in restored.items() if k not in timeless} == {
        k: v for k, v in original.items() if k not in timeless
    }  # game, ruleset and hash, options, levels, 2 of 2 games, complete, version
    assert restored["options"] == rows[0].options  # the key its games' rows carry
    # from the first game's creation (the run started just before) to the last one's end
    assert original["started_at"] <= restored["started_at"] <= restored["finished_at"]
    with database.connect() as conn:
        again = conn.execute(select(flat.RESULTS).order_by(c.game_id, c.seat)).all()
    assert again == rows  # the games' rows, under the experiment

    await asyncio.to_thread(
        run_lab, LabRun("navegador", run.seats, 2, "here", workers=1), database, None, 0
    )
    compared = await asyncio.to_thread(
        caravel, "lab", "compare", "lost-one", "here", "--json", env=env
    )
    assert compared.returncode == 0, compared.stderr
    assert json.loads(compared.stdout)["games"] == [2, 2]
    async with running_lobby(redis_url, keys, database_url, tmp_path / "up") as client:
        choices = await client.get("/analytics/filters", params={"game": "navegador"})
        figures = await client.get(
            "/analytics/figures", params={"game": "navegador", "experiment": "lost-one"}
        )
    assert choices.status_code == 200, choices.text
    known = {e["name"]: e for e in choices.json()["experiments"]}
    assert set(known) == {"lost-one", "here"}
    assert (known["lost-one"]["games_recorded"], known["lost-one"]["status"]) == (2, "complete")
    assert figures.status_code == 200 and figures.json()["games"] == 2


def test_a_rebuild_restores_an_experiment_only_where_sql_lost_it(database: Engine) -> None:
    """A row SQL holds stays as its run left it; a missing one is written."""
    moment = datetime(2026, 1, 1, tzinfo=UTC)
    row = flat.experiment_row(
        name="kept", game="navegador", ruleset="standard", ruleset_hash="0" * 16, options={},
        levels=("greedy",) * 3, planned=5, started_at=moment,
    )  # fmt: skip
    with database.begin() as conn:
        flat.restore_experiments(conn, [{**row, "status": "incomplete"}])
        flat.restore_experiments(conn, [row, {**row, "name": "new"}])
    found = experiment_rows(database)
    assert (found["kept"]["status"], found["new"]["status"]) == ("incomplete", "running")
    assert found["new"]["seats"] == "greedy,greedy,greedy" and found["new"]["games_planned"] == 5


async def test_a_live_run_the_pipeline_does_not_finish_is_marked_incomplete(
    redis: Redis, keys: Keys, database: Engine
) -> None:
    """An engine but no bot player: the games are created, none ends, the run stops when
    none came for ``stall_s`` and says so."""
    async with running_engine(redis, keys):
        run = LabRun("navegador", ("greedy",) * 3, 2, "stalled")
        report = await run_live(run, database, redis, keys, stall_s=1)
    assert (report.games, report.status) == (0, "incomplete")
    with database.connect() as conn:
        row = conn.execute(select(flat.EXPERIMENTS.c.status, flat.EXPERIMENTS.c.finished_at)).one()
    assert row.status == "incomplete" and row.finished_at is not None

    wipe(database)  # lost: its row comes back from the two games' logs, incomplete still
    await ScoringService(redis, keys, database).rebuild()
    restored = experiment_rows(database)["stalled"]
    assert (restored["status"], restored["games_recorded"], restored["games_planned"]) == (
        "incomplete",
        0,
        2,
    )


def test_live_refusals_name_what_is_wrong_and_write_nothing(
    database_url: str, tmp_path: Path
) -> None:
    """A name a game id cannot carry, a ruleset file: refused before Redis is reached."""
    env = {k: v for k, v in os.environ.items() if k != "CARAVEL_REDIS_URL"}
    env |= {"CARAVEL_DATABASE_URL": database_url, "CARAVEL_DATA_DIR": str(tmp_path / "data")}
    house = tmp_path / "house.toml"  # a valid file: the engine still could not read it
    house.write_text((Path(navegador.__file__).parent / "rulesets/standard.toml").read_text())
    refusals = [
        (["--experiment", "a b"], "letters, digits"),
        (["--experiment", "ok", "--ruleset", str(house)], "shipped ruleset"),
    ]
    for extra, said in refusals:
        run = caravel(
            "lab", "run", "--live", "--game", "navegador", "--seats", "greedy,greedy,greedy",
            "--games", "2", *extra, env={**env, "COLUMNS": "200"},
        )  # fmt: skip
        assert run.returncode != 0 and said in run.stderr, run.stderr
    assert not (tmp_path / "data").exists()  # no embedded Redis was started
    db = create_engine(database_url)
    try:
        assert flat.EXPERIMENTS.name not in inspect(db).get_table_names()  # not even the table
    finally:
        db.dispose()
