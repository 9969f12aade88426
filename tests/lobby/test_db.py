"""The SQL engine the services share."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from pathlib import Path
from threading import Barrier

import pytest
from sqlalchemy import create_engine, event, inspect

from services.lobby.db import make_engine
from services.scoring.db import TABLES as SCORING_TABLES
from services.scoring.db import create_tables

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


def test_a_sqlite_file_keeps_a_write_ahead_log(tmp_path: Path) -> None:
    """Issue 24: readers never wait for the writer, and a commit appends to one log. The
    mode is the file's: a connection opened later, by any process, has it too."""
    path = tmp_path / "caravel.db"
    make_engine(f"sqlite:///{path}").dispose()
    other = create_engine(f"sqlite:///{path}")  # another process's engine, say
    try:
        with other.connect() as connection:
            assert connection.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
    finally:
        other.dispose()


def test_a_sqlite_files_connections_sync_the_log_at_checkpoints_only(tmp_path: Path) -> None:
    """Issue 24: each of the engine's connections (the pool's threads each make their own)
    commits without an fsync of the log (``synchronous=NORMAL``, 1; SQLite's default is
    FULL, 2): durable to the application's crashes, not to a power loss."""
    engine = make_engine(f"sqlite:///{tmp_path / 'caravel.db'}")
    try:
        with engine.connect() as first, engine.connect() as second:
            for connection in (first, second):
                assert connection.exec_driver_sql("PRAGMA synchronous").scalar() == 1
    finally:
        engine.dispose()


def test_a_sqlite_file_keeps_a_connection_for_each_of_twenty_requests_at_once(
    tmp_path: Path,
) -> None:
    """Issue 24: 20 requests' threads using the database at once, then again, open no
    connection the second time (the pool kept 5: the other 15 were opened and closed
    each time)."""
    engine = make_engine(f"sqlite:///{tmp_path / 'caravel.db'}")
    opened: list[object] = []
    event.listen(engine, "connect", lambda connection, _record: opened.append(connection))
    try:
        for _ in range(2):
            with ExitStack() as held:
                for _ in range(20):
                    held.enter_context(engine.connect()).exec_driver_sql("SELECT 1")
        assert len(opened) <= 20
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
