"""The scoring projection's tables as Caravel made them before migrations (main at 9811f9b).

Revision ID: scoring_0001
Revises: <base>
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlmodel.sql.sqltypes import AutoString, UTCDateTime

revision = "scoring_0001"
down_revision: str | None = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "analytics_decisions",
        sa.Column("game_id", AutoString(length=64), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("seat", sa.Integer(), nullable=False),
        sa.Column("seat_kind", AutoString(length=32), nullable=False),
        sa.Column("kind", AutoString(length=32), nullable=False),
        sa.Column("latency_ms", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("game_id", "version"),
    )
    op.create_index(
        op.f("ix_analytics_decisions_seat_kind"), "analytics_decisions", ["seat_kind"], unique=False
    )
    op.create_table(
        "analytics_facts",
        sa.Column("game_id", AutoString(length=64), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("seat", sa.Integer(), nullable=False),
        sa.Column("kind", AutoString(length=32), nullable=False),
        sa.Column("subject", AutoString(length=64), nullable=False),
        sa.Column("value", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("game_id", "version", "seq"),
    )
    op.create_index(op.f("ix_analytics_facts_kind"), "analytics_facts", ["kind"], unique=False)
    op.create_table(
        "projection_checkpoints",
        sa.Column("projection", AutoString(length=32), nullable=False),
        sa.Column("stream", AutoString(length=200), nullable=False),
        sa.Column("last_id", AutoString(length=40), nullable=False),
        sa.PrimaryKeyConstraint("projection", "stream"),
    )
    op.create_table(
        "scoring_games",
        sa.Column("game_id", AutoString(length=64), nullable=False),
        sa.Column("game", AutoString(length=64), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("event_id", AutoString(length=100), nullable=True),
        sa.Column("status", AutoString(length=16), nullable=False),
        sa.Column("ruleset", AutoString(length=64), nullable=False),
        sa.Column("options", AutoString(), nullable=False),
        sa.Column("players", sa.Integer(), nullable=False),
        sa.Column("decisions", sa.Integer(), nullable=False),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("finished_at", UTCDateTime(), nullable=True),
        sa.Column("duration_s", sa.Float(), nullable=True),
        sa.Column("winners", AutoString(), nullable=True),
        sa.Column("finish_key", AutoString(length=120), nullable=True),
        sa.PrimaryKeyConstraint("game_id"),
    )
    op.create_index(
        op.f("ix_scoring_games_finish_key"), "scoring_games", ["finish_key"], unique=False
    )
    op.create_index(
        op.f("ix_scoring_games_finished_at"), "scoring_games", ["finished_at"], unique=False
    )
    op.create_index(op.f("ix_scoring_games_game"), "scoring_games", ["game"], unique=False)
    op.create_index(op.f("ix_scoring_games_status"), "scoring_games", ["status"], unique=False)
    op.create_table(
        "scoring_rating_history",
        sa.Column("finish_key", AutoString(length=120), nullable=False),
        sa.Column("player", AutoString(length=100), nullable=False),
        sa.Column("game", AutoString(length=64), nullable=False),
        sa.Column("game_id", AutoString(length=64), nullable=False),
        sa.Column("won", sa.Boolean(), nullable=False),
        sa.Column("mu_before", sa.Float(), nullable=False),
        sa.Column("sigma_before", sa.Float(), nullable=False),
        sa.Column("mu_after", sa.Float(), nullable=False),
        sa.Column("sigma_after", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("finish_key", "player"),
    )
    op.create_index(
        op.f("ix_scoring_rating_history_game"), "scoring_rating_history", ["game"], unique=False
    )
    op.create_table(
        "scoring_ratings",
        sa.Column("game", AutoString(length=64), nullable=False),
        sa.Column("player", AutoString(length=100), nullable=False),
        sa.Column("mu", sa.Float(), nullable=False),
        sa.Column("sigma", sa.Float(), nullable=False),
        sa.Column("ordinal", sa.Float(), nullable=False),
        sa.Column("games", sa.Integer(), nullable=False),
        sa.Column("wins", sa.Integer(), nullable=False),
        sa.Column("last_game", AutoString(length=64), nullable=False),
        sa.Column("updated_at", UTCDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("game", "player"),
    )
    op.create_index(
        op.f("ix_scoring_ratings_ordinal"), "scoring_ratings", ["ordinal"], unique=False
    )
    op.create_table(
        "scoring_results",
        sa.Column("game_id", AutoString(length=64), nullable=False),
        sa.Column("seat", sa.Integer(), nullable=False),
        sa.Column("game", AutoString(length=64), nullable=False),
        sa.Column("player", AutoString(length=100), nullable=False),
        sa.Column("seat_kind", AutoString(length=32), nullable=False),
        sa.Column("side", AutoString(length=32), nullable=False),
        sa.Column("place", sa.Integer(), nullable=False),
        sa.Column("won", sa.Boolean(), nullable=False),
        sa.Column("breakdown", AutoString(), nullable=False),
        sa.Column("total", sa.Integer(), nullable=False),
        sa.Column("tiebreak", AutoString(), nullable=False),
        sa.PrimaryKeyConstraint("game_id", "seat"),
    )
    op.create_index(op.f("ix_scoring_results_game"), "scoring_results", ["game"], unique=False)
    op.create_index(op.f("ix_scoring_results_player"), "scoring_results", ["player"], unique=False)
    op.create_table(
        "scoring_standings",
        sa.Column("game_id", AutoString(length=64), nullable=False),
        sa.Column("seat", sa.Integer(), nullable=False),
        sa.Column("game", AutoString(length=64), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("player", AutoString(length=100), nullable=False),
        sa.Column("breakdown", AutoString(), nullable=False),
        sa.Column("total", sa.Integer(), nullable=False),
        sa.Column("place", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("game_id", "seat"),
    )


def downgrade() -> None:
    op.drop_table("scoring_standings")
    op.drop_table("scoring_results")
    op.drop_table("scoring_ratings")
    op.drop_table("scoring_rating_history")
    op.drop_table("scoring_games")
    op.drop_table("projection_checkpoints")
    op.drop_table("analytics_facts")
    op.drop_table("analytics_decisions")
