"""The SQL engine the services share."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from sqlalchemy import inspect
from sqlmodel import Session

from services.lobby.db import LobbyTable, make_engine
from shared.games.api import DEFAULT_GAME


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
