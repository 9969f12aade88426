"""The SQL migrations (Alembic) of the lobby's and the scoring service's tables."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import Engine, MetaData, create_engine, inspect, text
from sqlmodel import Session, SQLModel

from services.lobby import db as lobby
from services.scoring import db as scoring
from shared.sql import current, migrate
from tests.test_cli import caravel

pytestmark = pytest.mark.every_database  # SQL semantics: SQLite and PostgreSQL

# The tables as the previous release (main at 9811f9b) made them, before the migrations:
# its models' DDL, with the timestamp type of each database.
PREVIOUS_RELEASE = """
CREATE TABLE lobby_tables (id VARCHAR(64) NOT NULL,
 game VARCHAR(64) DEFAULT 'age_of_discovery' NOT NULL, ruleset VARCHAR(64) NOT NULL,
 options VARCHAR NOT NULL, seats INTEGER NOT NULL, status VARCHAR(16) NOT NULL,
 deadline_s FLOAT NOT NULL, created_at {ts} NOT NULL, PRIMARY KEY (id));
CREATE INDEX ix_lobby_tables_status ON lobby_tables (status);
CREATE TABLE lobby_tickets (id VARCHAR(64) NOT NULL, name VARCHAR(64) NOT NULL,
 game VARCHAR(64) DEFAULT 'age_of_discovery' NOT NULL,
 ruleset VARCHAR(64) DEFAULT 'standard' NOT NULL, players INTEGER NOT NULL,
 options VARCHAR NOT NULL, status VARCHAR(16) NOT NULL, table_id VARCHAR(64), seat INTEGER,
 created_at {ts} NOT NULL, PRIMARY KEY (id));
CREATE INDEX ix_lobby_tickets_status ON lobby_tickets (status);
CREATE TABLE lobby_seats (table_id VARCHAR(64) NOT NULL, seat INTEGER NOT NULL,
 kind VARCHAR(8) NOT NULL, name VARCHAR(64) NOT NULL, bot_level VARCHAR(16),
 "left" BOOLEAN NOT NULL, holder VARCHAR(64) DEFAULT '' NOT NULL, PRIMARY KEY (table_id, seat),
 FOREIGN KEY(table_id) REFERENCES lobby_tables (id));
CREATE UNIQUE INDEX lobby_seats_one_per_name ON lobby_seats (table_id, name)
 WHERE kind = 'human';
CREATE TABLE analytics_decisions (game_id VARCHAR(64) NOT NULL, version INTEGER NOT NULL,
 seat INTEGER NOT NULL, seat_kind VARCHAR(32) NOT NULL, kind VARCHAR(32) NOT NULL,
 latency_ms FLOAT NOT NULL, PRIMARY KEY (game_id, version));
CREATE INDEX ix_analytics_decisions_seat_kind ON analytics_decisions (seat_kind);
CREATE TABLE analytics_facts (game_id VARCHAR(64) NOT NULL, version INTEGER NOT NULL,
 seq INTEGER NOT NULL, seat INTEGER NOT NULL, kind VARCHAR(32) NOT NULL,
 subject VARCHAR(64) NOT NULL, value INTEGER NOT NULL, PRIMARY KEY (game_id, version, seq));
CREATE INDEX ix_analytics_facts_kind ON analytics_facts (kind);
CREATE TABLE projection_checkpoints (projection VARCHAR(32) NOT NULL,
 stream VARCHAR(200) NOT NULL, last_id VARCHAR(40) NOT NULL, PRIMARY KEY (projection, stream));
CREATE TABLE scoring_games (game_id VARCHAR(64) NOT NULL, game VARCHAR(64) NOT NULL,
 version INTEGER NOT NULL, event_id VARCHAR(100), status VARCHAR(16) NOT NULL,
 ruleset VARCHAR(64) NOT NULL, options VARCHAR NOT NULL, players INTEGER NOT NULL,
 decisions INTEGER NOT NULL, created_at {ts} NOT NULL, finished_at {ts}, duration_s FLOAT,
 winners VARCHAR, finish_key VARCHAR(120), PRIMARY KEY (game_id));
CREATE INDEX ix_scoring_games_finished_at ON scoring_games (finished_at);
CREATE INDEX ix_scoring_games_status ON scoring_games (status);
CREATE INDEX ix_scoring_games_finish_key ON scoring_games (finish_key);
CREATE INDEX ix_scoring_games_game ON scoring_games (game);
CREATE TABLE scoring_rating_history (finish_key VARCHAR(120) NOT NULL,
 player VARCHAR(100) NOT NULL, game VARCHAR(64) NOT NULL, game_id VARCHAR(64) NOT NULL,
 won BOOLEAN NOT NULL, mu_before FLOAT NOT NULL, sigma_before FLOAT NOT NULL,
 mu_after FLOAT NOT NULL, sigma_after FLOAT NOT NULL, PRIMARY KEY (finish_key, player));
CREATE INDEX ix_scoring_rating_history_game ON scoring_rating_history (game);
CREATE TABLE scoring_ratings (game VARCHAR(64) NOT NULL, player VARCHAR(100) NOT NULL,
 mu FLOAT NOT NULL, sigma FLOAT NOT NULL, ordinal FLOAT NOT NULL, games INTEGER NOT NULL,
 wins INTEGER NOT NULL, last_game VARCHAR(64) NOT NULL, updated_at {ts} NOT NULL,
 PRIMARY KEY (game, player));
CREATE INDEX ix_scoring_ratings_ordinal ON scoring_ratings (ordinal);
CREATE TABLE scoring_results (game_id VARCHAR(64) NOT NULL, seat INTEGER NOT NULL,
 game VARCHAR(64) NOT NULL, player VARCHAR(100) NOT NULL, seat_kind VARCHAR(32) NOT NULL,
 side VARCHAR(32) NOT NULL, place INTEGER NOT NULL, won BOOLEAN NOT NULL,
 breakdown VARCHAR NOT NULL, total INTEGER NOT NULL, tiebreak VARCHAR NOT NULL,
 PRIMARY KEY (game_id, seat));
CREATE INDEX ix_scoring_results_game ON scoring_results (game);
CREATE INDEX ix_scoring_results_player ON scoring_results (player);
CREATE TABLE scoring_standings (game_id VARCHAR(64) NOT NULL, seat INTEGER NOT NULL,
 game VARCHAR(64) NOT NULL, version INTEGER NOT NULL, player VARCHAR(100) NOT NULL,
 breakdown VARCHAR NOT NULL, total INTEGER NOT NULL, place INTEGER NOT NULL,
 PRIMARY KEY (game_id, seat));
INSERT INTO lobby_tables VALUES ('t-old', 'age_of_discovery', 'standard',
 '{{"university": "on", "tile_set": "b"}}', 3, 'running', 60, '2026-11-01 10:00:00');
INSERT INTO lobby_seats VALUES ('t-old', 0, 'human', 'ana', NULL, {false}, 'h-ana');
INSERT INTO scoring_games (game_id, game, version, event_id, status, ruleset, options, players,
 decisions, created_at) VALUES ('t-old', 'age_of_discovery', 7, 'e-7', 'running', 'standard',
 '{{}}', 3, 2, '2026-11-01 10:00:00');
INSERT INTO scoring_games (game_id, game, version, event_id, status, ruleset, options, players,
 decisions, created_at, winners) VALUES ('t-done', 'age_of_discovery', 90, 'e-90', 'finished',
 'standard', '{{}}', 2, 40, '2026-11-01 10:00:00', '[1]');
INSERT INTO scoring_results VALUES ('t-done', 1, 'age_of_discovery', 'ana', 'human', 'Spain', 1,
 {true}, '{{"colonies": 9, "discoveries": 2, "buildings": 0, "economy": 4}}', 15, '[15, 3]');
INSERT INTO scoring_standings VALUES ('t-done', 1, 'age_of_discovery', 90, 'ana',
 '{{"colonies": 9, "discoveries": 2, "buildings": 0, "economy": 4}}', 15, 1);
INSERT INTO scoring_ratings VALUES ('age_of_discovery', 'ana', 25, 8, 1, 4, 2, 'g-1',
 '2026-11-01 10:00:00');
"""


@pytest.fixture
def engine(database_url: str) -> Iterator[Engine]:
    engine = create_engine(database_url)
    yield engine
    engine.dispose()


def differences(engine: Engine) -> list[object]:
    """What Alembic's autogenerate finds between the database and the models (the lobby's
    and the scoring service's tables; the version tables aside)."""
    models = MetaData()
    for table in SQLModel.metadata.sorted_tables:
        if table.name.startswith(("lobby_", "scoring_", "analytics_", "projection_")):
            table.to_metadata(models)
    with engine.connect() as connection:
        context = MigrationContext.configure(
            connection,
            opts={
                "compare_type": True,
                "include_name": lambda name, kind, _: (
                    not (kind == "table" and str(name).startswith("alembic_version"))
                ),
            },
        )
        return list(compare_metadata(context, models))


def test_a_database_of_the_previous_release_is_upgraded_and_keeps_its_rows(
    engine: Engine,
) -> None:
    """A data folder of the release before the migrations (its tables made at start-up, no
    version table): each service stamps it at the baseline, upgrades it to the head
    revision, and the rows are there as they were."""
    postgres = engine.dialect.name == "postgresql"
    ddl = PREVIOUS_RELEASE.format(
        ts="TIMESTAMP WITH TIME ZONE" if postgres else "DATETIME",
        false="false" if postgres else "0",
        true="true" if postgres else "1",
    )
    with engine.begin() as connection:
        for statement in filter(str.strip, ddl.split(";")):
            connection.execute(text(statement))
    migrate(engine, lobby.MIGRATIONS)
    migrate(engine, scoring.MIGRATIONS)
    migrate(engine, lobby.MIGRATIONS)  # a second start: nothing left to do
    assert current(engine, lobby.MIGRATIONS) == "lobby_0003"
    assert current(engine, scoring.MIGRATIONS) == "scoring_0006"
    with engine.connect() as connection:
        table = connection.execute(
            text("SELECT status, starting_since, start_error FROM lobby_tables")
        ).one()
        seat = connection.execute(text("SELECT name, holder FROM lobby_seats")).one()
        game = connection.execute(
            text("SELECT version, event_id FROM scoring_games WHERE game_id = 't-old'")
        ).one()
        rating = connection.execute(text("SELECT player, games FROM scoring_ratings")).one()
        results = connection.execute(text("SELECT count(*) FROM analytics_results")).scalar()
    assert tuple(table) == ("running", None, "")
    assert tuple(seat) == ("ana", "h-ana")
    assert tuple(game) == (7, "e-7")
    assert tuple(rating) == ("ana", 4)
    assert results == 0
    assert differences(engine) == []
    _the_json_text_of_before_reads_as_values(engine)


def _the_json_text_of_before_reads_as_values(engine: Engine) -> None:
    """The JSON columns (now SQLAlchemy's JSON type) give back the text rows wrote before as
    values, an object's keys in their order (a breakdown's order is the game's)."""
    with Session(engine) as session:
        table = session.get(lobby.LobbyTable, "t-old")
        finished = session.get(scoring.ScoredGame, "t-done")
        running = session.get(scoring.ScoredGame, "t-old")
        result = session.get(scoring.Result, ("t-done", 1))
        standing = session.get(scoring.Standing, ("t-done", 1))
    assert table is not None and table.options == {"university": "on", "tile_set": "b"}
    assert finished is not None and finished.winners == [1]
    assert running is not None and running.winners is None
    assert result is not None and standing is not None
    parts = ["colonies", "discoveries", "buildings", "economy"]
    assert list(result.breakdown) == parts and list(standing.breakdown) == parts
    assert result.breakdown["colonies"] == 9 and result.tiebreak == [15, 3]


def test_a_fresh_database_upgraded_to_head_has_the_tables_of_the_models(
    engine: Engine,
) -> None:
    assert current(engine, lobby.MIGRATIONS) is None
    migrate(engine, lobby.MIGRATIONS)
    migrate(engine, scoring.MIGRATIONS)
    assert differences(engine) == []
    tables = set(inspect(engine).get_table_names())
    assert {"alembic_version_lobby", "alembic_version_scoring"} <= tables


def test_a_database_made_between_the_baseline_and_the_migrations_is_upgraded(
    engine: Engine,
) -> None:
    """A database made by the add-column start-up after the previous release (its tables
    already at the head's shape, no version table) is stamped and upgraded without adding
    what it has."""
    lobby_tables = [t for t in SQLModel.metadata.sorted_tables if t.name.startswith("lobby_")]
    SQLModel.metadata.create_all(engine, tables=[*lobby_tables, *scoring.TABLES])
    migrate(engine, lobby.MIGRATIONS)
    migrate(engine, scoring.MIGRATIONS)
    assert current(engine, scoring.MIGRATIONS) == "scoring_0006"
    assert differences(engine) == []


def test_the_db_commands_upgrade_and_show_the_revisions(
    database_url: str, engine: Engine, tmp_path: Path
) -> None:
    env = {**os.environ, "CARAVEL_DATABASE_URL": database_url, "CARAVEL_DATA_DIR": str(tmp_path)}
    before = caravel("db", "current", "--json", env=env)
    upgraded = caravel("db", "upgrade", "--json", env=env)
    assert before.returncode == 0 and upgraded.returncode == 0, before.stderr + upgraded.stderr
    assert json.loads(before.stdout) == {"lobby": None, "scoring": None}
    assert json.loads(upgraded.stdout) == {"lobby": "lobby_0003", "scoring": "scoring_0006"}
    assert differences(engine) == []


def test_imported_is_added_to_the_flat_results_and_the_cells_key(engine: Engine) -> None:
    """A database at scoring_0003 with a result and a cell: after the upgrade both are of
    a game played here (imported false), and a cell of imported games beside the same
    keys is a row of its own (the key holds ``imported``); a downgrade takes the imported
    cells away with the column."""
    migrate(engine, lobby.MIGRATIONS)
    migrate(engine, scoring.MIGRATIONS, "scoring_0003")
    key = "'g', 'standard', 'h', '{}', 4, 0, 'human'"
    rest = "'', '2026-11-27T10', 'position', '0'"
    with engine.begin() as connection:
        connection.execute(text(f"INSERT INTO analytics_cells VALUES ({key}, {rest}, 4, 1, 0, 0)"))
    migrate(engine, scoring.MIGRATIONS)
    assert current(engine, scoring.MIGRATIONS) == "scoring_0006"
    assert differences(engine) == []
    columns = "game, ruleset, ruleset_hash, options, players, humans, seat_kind, imported, "
    columns += "experiment, finished_hour, dim, value, n, wins, total, squares"
    with engine.begin() as connection:
        held = connection.execute(text("SELECT imported, n FROM analytics_cells")).all()
        assert [(bool(i), n) for i, n in held] == [(False, 4)]
        connection.execute(
            text(
                f"INSERT INTO analytics_cells ({columns}) VALUES ({key}, true, {rest}, 8, 2, 0, 0)"
            )
        )
    with engine.begin() as connection, pytest.raises(Exception, match=r"(?i)unique|duplicate"):
        connection.execute(
            text(
                f"INSERT INTO analytics_cells ({columns}) VALUES ({key}, true, {rest}, 1, 0, 0, 0)"
            )
        )
    migrate_down = scoring.MIGRATIONS
    from alembic import command

    with engine.begin() as connection:
        command.downgrade(migrate_down.config(connection), "scoring_0003")
    with engine.connect() as connection:
        assert connection.execute(text("SELECT n FROM analytics_cells")).scalars().all() == [4]


def test_the_fine_cells_are_filled_from_the_flat_rows_held(engine: Engine) -> None:
    """A database at scoring_0004 with a finished game's flat rows (finished 1 µs before a
    second's end): after the upgrade its second and minute cells hold that second's and
    minute's sums, the same as its hourly cells."""
    from datetime import UTC, datetime

    from services.scoring import flat

    migrate(engine, lobby.MIGRATIONS)
    migrate(engine, scoring.MIGRATIONS, "scoring_0004")
    moment = datetime(2026, 11, 27, 10, 17, 42, 999_999, tzinfo=UTC)
    common = {"game_id": "g1", "game": "navegador", "ruleset": "standard", "ruleset_hash": "h"}
    common |= {"options": "{}", "players": 2, "humans": 0, "seat_kind": "bot:greedy"}
    common |= {"player": "p", "side": "", "decisions": 5, "caravel_version": "0"}
    common |= {"finished_at": moment, "finished_hour": "2026-11-27T10", "experiment": "x"}
    rows = [
        {**common, "seat": s, "turn_position": s, "place": s + 1, "won": s == 0, "total": 7 - s}
        for s in (0, 1)
    ]
    with engine.begin() as connection:
        connection.execute(flat.RESULTS.insert(), rows)
    migrate(engine, scoring.MIGRATIONS)
    sums = "dim, value, n, wins, total, squares"
    with engine.connect() as connection:
        hourly = connection.execute(text(f"SELECT {sums} FROM analytics_cells")).all()
        fine = {
            grain: sorted(
                connection.execute(
                    text(f"SELECT start, {sums} FROM analytics_fine_cells WHERE grain = :g"),
                    {"g": grain},
                ).all()
            )
            for grain in ("minute", "second")
        }
    assert ("position", "0", 1, 1, 0, 0) in hourly
    assert {r[0] for r in fine["second"]} == {"2026-11-27T10:17:42"}
    assert {r[0] for r in fine["minute"]} == {"2026-11-27T10:17"}
    assert sorted(r[1:] for r in fine["second"]) == sorted(tuple(r) for r in hourly)
    assert sorted(r[1:] for r in fine["minute"]) == sorted(tuple(r) for r in hourly)
