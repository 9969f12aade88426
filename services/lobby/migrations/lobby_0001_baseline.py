"""The lobby's tables as Caravel made them before migrations (main at 9811f9b).

Revision ID: lobby_0001
Revises: <base>
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlmodel.sql.sqltypes import AutoString, UTCDateTime

revision = "lobby_0001"
down_revision: str | None = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "lobby_tables",
        sa.Column("id", AutoString(length=64), nullable=False),
        sa.Column("game", AutoString(length=64), server_default="age_of_discovery", nullable=False),
        sa.Column("ruleset", AutoString(length=64), nullable=False),
        sa.Column("options", AutoString(), nullable=False),
        sa.Column("seats", sa.Integer(), nullable=False),
        sa.Column("status", AutoString(length=16), nullable=False),
        sa.Column("deadline_s", sa.Float(), nullable=False),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index(op.f("ix_lobby_tables_status"), "lobby_tables", ["status"], unique=False)
    op.create_table(
        "lobby_tickets",
        sa.Column("id", AutoString(length=64), nullable=False),
        sa.Column("name", AutoString(length=64), nullable=False),
        sa.Column("game", AutoString(length=64), server_default="age_of_discovery", nullable=False),
        sa.Column("ruleset", AutoString(length=64), server_default="standard", nullable=False),
        sa.Column("players", sa.Integer(), nullable=False),
        sa.Column("options", AutoString(), nullable=False),
        sa.Column("status", AutoString(length=16), nullable=False),
        sa.Column("table_id", AutoString(length=64), nullable=True),
        sa.Column("seat", sa.Integer(), nullable=True),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index(op.f("ix_lobby_tickets_status"), "lobby_tickets", ["status"], unique=False)
    op.create_table(
        "lobby_seats",
        sa.Column("table_id", AutoString(length=64), nullable=False),
        sa.Column("seat", sa.Integer(), nullable=False),
        sa.Column("kind", AutoString(length=8), nullable=False),
        sa.Column("name", AutoString(length=64), nullable=False),
        sa.Column("bot_level", AutoString(length=16), nullable=True),
        sa.Column("left", sa.Boolean(), nullable=False),
        sa.Column("holder", AutoString(length=64), server_default="", nullable=False),
        sa.ForeignKeyConstraint(
            ["table_id"],
            ["lobby_tables.id"],
        ),
        sa.PrimaryKeyConstraint("table_id", "seat"),
    )
    op.create_index(
        "lobby_seats_one_per_name",
        "lobby_seats",
        ["table_id", "name"],
        unique=True,
        sqlite_where=sa.text("kind = 'human'"),
        postgresql_where=sa.text("kind = 'human'"),
    )


def downgrade() -> None:
    op.drop_table("lobby_seats")
    op.drop_table("lobby_tickets")
    op.drop_table("lobby_tables")
