"""Alembic's environment: migrates on the connection :func:`shared.sql.migrate` holds the
schema lock on, recording the revision in the component's own version table."""

from __future__ import annotations

from alembic import context

config = context.config
context.configure(
    connection=config.attributes["connection"],
    version_table=config.attributes["version_table"],
    render_as_batch=True,  # SQLite alters a table by copying it
)
with context.begin_transaction():
    context.run_migrations()
