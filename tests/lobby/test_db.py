"""The SQL engine the services share."""

from __future__ import annotations

import sqlite3
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from threading import Barrier

import pytest
from sqlalchemy import create_engine, inspect, text
from sqlmodel import Session

from services.lobby.db import LobbyTable, make_engine
from services.scoring.db import TABLES as SCORING_TABLES
from services.scoring.db import create_tables
from shared.games.api import DEFAULT_GAME

pytestmark = pytest.mark.every_database  # SQL semantics: SQLite and PostgreSQL


def test_a_sqlite_database_in_a_data_folder_not_made_yet_is_created(tmp_path: Path) -> None:
    """`caravel scoring` or `caravel lobby` on a fresh machine: the folder appears."""
    path = tmp_path / "fresh" / "data" / "caravel.db"
    engine = make_engine(f"sqlite:///{path}")
    try:
        assert path.exists()
        assert "lobby_tables" in inspect(engine).get_table_names()
    finally:
        engine.dispose()


def test_a_database_of_an_older_caravel_gains_the_game_column(tmp_path: Path) -> None:
    """A data folder from before tables named their game keeps working: the column is
    added, and the tables already there are of the default game (as their logs are)."""
    path = tmp_path / "old.db"
    with sqlite3.connect(path) as old:
        old.execute(
            "CREATE TABLE lobby_tables (id VARCHAR(64) PRIMARY KEY, ruleset VARCHAR(64) NOT NULL,"
            " options VARCHAR NOT NULL, seats INTEGER NOT NULL, status VARCHAR(16) NOT NULL,"
            " deadline_s FLOAT NOT NULL, created_at DATETIME NOT NULL)"
        )
        old.execute(
            "INSERT INTO lobby_tables VALUES ('t-old', 'standard', '{}', 3, 'open', 60,"
            " '2026-01-01 00:00:00')"
        )
    engine = make_engine(f"sqlite:///{path}")
    try:
        with Session(engine) as session:
            table = session.get(LobbyTable, "t-old")
            assert table is not None and table.game == DEFAULT_GAME
        again = make_engine(f"sqlite:///{path}")  # a second start finds nothing to add
        columns = [c["name"] for c in inspect(again).get_columns("lobby_tables")]
        again.dispose()
        assert columns.count("game") == 1
    finally:
        engine.dispose()


def test_lobby_and_scoring_starting_together_on_a_fresh_database_both_get_their_tables(
    database_url: str,
) -> None:
    """`caravel lobby` and `caravel scoring` started at once on an empty database (threads
    here, each with its engine as each process has): every one creates the tables it needs
    without failing on the tables another is creating, and they are all there after."""
    racers = 6
    start = Barrier(racers)

    def lobby() -> None:
        start.wait()
        make_engine(database_url).dispose()

    def scoring() -> None:
        engine = create_engine(database_url)
        try:
            start.wait()
            create_tables(engine)
        finally:
            engine.dispose()

    with ThreadPoolExecutor(racers) as pool:
        started = [pool.submit(lobby if i % 2 else scoring) for i in range(racers)]
        for future in started:
            future.result()  # raises what a racer raised
    engine = create_engine(database_url)
    try:
        tables = set(inspect(engine).get_table_names())
    finally:
        engine.dispose()
    assert {"lobby_tables", "lobby_seats", "lobby_tickets"} <= tables
    assert {table.name for table in SCORING_TABLES} <= tables


def test_a_scoring_table_of_an_older_caravel_gains_the_event_id_column(database_url: str) -> None:
    """A scoring_games table from before rows named their last event: scoring processes
    starting at once add the column once (under the schema lock), the rows stay and have no
    event id (their version alone is checked against the log)."""
    engine = create_engine(database_url)
    racers = 4
    start = Barrier(racers)

    def scoring() -> None:
        start.wait()
        create_tables(engine)

    try:
        create_tables(engine)
        with engine.begin() as conn:
            conn.execute(text("ALTER TABLE scoring_games DROP COLUMN event_id"))
            conn.execute(
                text(
                    "INSERT INTO scoring_games (game_id, game, version, status, ruleset, options,"
                    " players, decisions, created_at) VALUES ('g-old', 'age_of_discovery', 7,"
                    " 'running', 'standard', '{}', 3, 2, '2026-01-01 00:00:00')"
                )
            )
        with ThreadPoolExecutor(racers) as pool:
            for future in [pool.submit(scoring) for _ in range(racers)]:
                future.result()  # raises what a racer raised
        columns = [c["name"] for c in inspect(engine).get_columns("scoring_games")]
        with engine.connect() as conn:
            old = conn.execute(text("SELECT version, event_id FROM scoring_games")).one()
    finally:
        engine.dispose()
    assert columns.count("event_id") == 1
    assert tuple(old) == (7, None)
