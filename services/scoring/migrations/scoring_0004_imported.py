"""Imported games marked in analytics: ``imported`` on the flat results and in the key of
the summed cells (the analytics filter ``imported=exclude|include|only``).

Revision ID: scoring_0004
Revises: scoring_0003

Every row held before this revision is of a game played here (nothing marked a game
imported before), so both columns start false and the cells stay valid sums; the cells'
primary key gains the column (SQLite: the table copied under the new key, in a batch).
A database whose tables already have the column (made from the models) is left as it is.
"""

from __future__ import annotations

import warnings

import sqlalchemy as sa
from alembic import op

revision = "scoring_0004"
down_revision: str | None = "scoring_0003"
branch_labels = None
depends_on = None

CELL_KEY = [
    "game",
    "ruleset",
    "ruleset_hash",
    "options",
    "players",
    "humans",
    "seat_kind",
    "imported",
    "experiment",
    "finished_hour",
    "dim",
    "value",
]


def _column() -> sa.Column[bool]:
    return sa.Column("imported", sa.Boolean(), nullable=False, server_default=sa.false())


def _has(table: str) -> bool:
    columns = sa.inspect(op.get_bind()).get_columns(table)
    return any(c["name"] == "imported" for c in columns)


def upgrade() -> None:
    if not _has("analytics_results"):
        op.add_column("analytics_results", _column())
    if _has("analytics_cells"):
        return
    key = sa.inspect(op.get_bind()).get_pk_constraint("analytics_cells").get("name")
    if op.get_bind().dialect.name == "sqlite":
        with warnings.catch_warnings():  # "the copy's key is not the old table's": it is not
            warnings.simplefilter("ignore", sa.exc.SAWarning)
            with op.batch_alter_table("analytics_cells", recreate="always") as batch:
                batch.add_column(_column())
                batch.create_primary_key(key or "pk_analytics_cells", CELL_KEY)
        return
    op.add_column("analytics_cells", _column())
    key = key or "analytics_cells_pkey"  # PostgreSQL names every key
    op.drop_constraint(key, "analytics_cells", type_="primary")
    op.create_primary_key(key, "analytics_cells", CELL_KEY)


def downgrade() -> None:
    """Imported games' rows and cells go with the column (their sums would merge)."""
    op.execute("DELETE FROM analytics_cells WHERE imported")
    op.execute(
        "DELETE FROM analytics_seat_facts WHERE game_id IN "
        "(SELECT game_id FROM analytics_results WHERE imported)"
    )
    op.execute("DELETE FROM analytics_results WHERE imported")
    key = sa.inspect(op.get_bind()).get_pk_constraint("analytics_cells").get("name")
    with op.batch_alter_table("analytics_cells", recreate="always") as batch:
        batch.drop_column("imported")
        batch.create_primary_key(
            key or "pk_analytics_cells", [k for k in CELL_KEY if k != "imported"]
        )
    with op.batch_alter_table("analytics_results") as batch:
        batch.drop_column("imported")
