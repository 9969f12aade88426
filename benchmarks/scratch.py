"""Throw-away databases for benchmarks: a PostgreSQL schema of their own, dropped after."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import create_engine, text


@contextmanager
def postgres_schema(url: str) -> Iterator[str]:
    """A URL whose connections work in a new schema of the server at ``url``; the schema and
    everything in it are dropped on exit, so a benchmark never touches other tables."""
    schema = f"bench_{uuid.uuid4().hex[:8]}"
    admin = create_engine(url)
    with admin.begin() as conn:
        conn.execute(text(f'CREATE SCHEMA "{schema}"'))
    try:
        separator = "&" if "?" in url else "?"
        yield f"{url}{separator}options=-csearch_path%3D{schema}"
    finally:
        with admin.begin() as conn:
            conn.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
        admin.dispose()
