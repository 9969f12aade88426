"""A table's unfinished start: since when it is being started, and why the last start failed.

Revision ID: lobby_0002
Revises: lobby_0001

A database made by a Caravel between the baseline and the migrations has the columns
already (the add-column start-up of then): they are added only where missing.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlmodel.sql.sqltypes import AutoString, UTCDateTime

revision = "lobby_0002"
down_revision: str | None = "lobby_0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    present = {c["name"] for c in sa.inspect(op.get_bind()).get_columns("lobby_tables")}
    with op.batch_alter_table("lobby_tables") as batch:
        if "starting_since" not in present:
            batch.add_column(sa.Column("starting_since", UTCDateTime(), nullable=True))
            batch.create_index(batch.f("ix_lobby_tables_starting_since"), ["starting_since"])
        if "start_error" not in present:
            batch.add_column(
                sa.Column("start_error", AutoString(length=500), server_default="", nullable=False)
            )


def downgrade() -> None:
    with op.batch_alter_table("lobby_tables") as batch:
        batch.drop_index(batch.f("ix_lobby_tables_starting_since"))
        batch.drop_column("start_error")
        batch.drop_column("starting_since")
