"""The SQL engine the services share."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import inspect

from services.lobby.db import make_engine


def test_a_sqlite_database_in_a_data_folder_not_made_yet_is_created(tmp_path: Path) -> None:
    """`caravel scoring` or `caravel lobby` on a fresh machine: the folder appears."""
    path = tmp_path / "fresh" / "data" / "caravel.db"
    engine = make_engine(f"sqlite:///{path}")
    try:
        assert path.exists()
        assert "lobby_tables" in inspect(engine).get_table_names()
    finally:
        engine.dispose()
