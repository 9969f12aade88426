"""The analytics tables: flat results and seat facts (what the export writes), the lab's
experiments, and the summed cells the analytics page queries.

Revision ID: scoring_0002
Revises: scoring_0001

A database made by a Caravel between the baseline and the migrations has the tables
already: they are created only where missing. The results' ``score_*`` columns are the
breakdown parts of the games registered when this revision was written (a game added later
brings a revision adding its parts).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "scoring_0002"
down_revision: str | None = "scoring_0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    present = set(sa.inspect(op.get_bind()).get_table_names())
    if "analytics_cells" not in present:
        op.create_table(
            "analytics_cells",
            sa.Column("game", sa.String(length=64), nullable=False),
            sa.Column("ruleset", sa.String(length=200), nullable=False),
            sa.Column("ruleset_hash", sa.String(length=32), nullable=False),
            sa.Column("options", sa.String(length=1000), nullable=False),
            sa.Column("players", sa.Integer(), nullable=False),
            sa.Column("humans", sa.Integer(), nullable=False),
            sa.Column("seat_kind", sa.String(length=32), nullable=False),
            sa.Column("experiment", sa.String(length=100), nullable=False),
            sa.Column("finished_hour", sa.String(length=13), nullable=False),
            sa.Column("dim", sa.String(length=16), nullable=False),
            sa.Column("value", sa.String(length=200), nullable=False),
            sa.Column("n", sa.Integer(), nullable=False),
            sa.Column("wins", sa.Integer(), nullable=False),
            sa.Column("total", sa.BigInteger(), nullable=False),
            sa.Column("squares", sa.BigInteger(), nullable=False),
            sa.PrimaryKeyConstraint(
                "game",
                "ruleset",
                "ruleset_hash",
                "options",
                "players",
                "humans",
                "seat_kind",
                "experiment",
                "finished_hour",
                "dim",
                "value",
            ),
        )
    if "analytics_experiments" not in present:
        op.create_table(
            "analytics_experiments",
            sa.Column("name", sa.String(length=100), nullable=False),
            sa.Column("game", sa.String(length=64), nullable=False),
            sa.Column("ruleset", sa.String(length=200), nullable=False),
            sa.Column("ruleset_hash", sa.String(length=32), nullable=False),
            sa.Column("options", sa.String(length=1000), nullable=False),
            sa.Column("seats", sa.String(length=500), nullable=False),
            sa.Column("games_planned", sa.Integer(), nullable=False),
            sa.Column("games_recorded", sa.Integer(), nullable=False),
            sa.Column("status", sa.String(length=16), nullable=False),
            sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
            sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
            sa.Column("caravel_version", sa.String(length=32), nullable=False),
            sa.PrimaryKeyConstraint("name"),
        )
    if "analytics_results" not in present:
        op.create_table(
            "analytics_results",
            sa.Column("game_id", sa.String(length=64), nullable=False),
            sa.Column("seat", sa.Integer(), nullable=False),
            sa.Column("game", sa.String(length=64), nullable=False),
            sa.Column("ruleset", sa.String(length=200), nullable=False),
            sa.Column("ruleset_hash", sa.String(length=32), nullable=False),
            sa.Column("options", sa.String(length=1000), nullable=False),
            sa.Column("players", sa.Integer(), nullable=False),
            sa.Column("humans", sa.Integer(), nullable=False),
            sa.Column("turn_position", sa.Integer(), nullable=False),
            sa.Column("seat_kind", sa.String(length=32), nullable=False),
            sa.Column("player", sa.String(length=100), nullable=False),
            sa.Column("side", sa.String(length=64), nullable=False),
            sa.Column("place", sa.Integer(), nullable=False),
            sa.Column("won", sa.Boolean(), nullable=False),
            sa.Column("total", sa.Integer(), nullable=False),
            sa.Column("score_colonies", sa.Integer(), nullable=True),
            sa.Column("score_discoveries", sa.Integer(), nullable=True),
            sa.Column("score_buildings", sa.Integer(), nullable=True),
            sa.Column("score_economy", sa.Integer(), nullable=True),
            sa.Column("score_workers", sa.Integer(), nullable=True),
            sa.Column("score_ships", sa.Integer(), nullable=True),
            sa.Column("score_money", sa.Integer(), nullable=True),
            sa.Column("score_colony_vp", sa.Integer(), nullable=True),
            sa.Column("score_factory_vp", sa.Integer(), nullable=True),
            sa.Column("score_explorer_vp", sa.Integer(), nullable=True),
            sa.Column("score_shipyard_vp", sa.Integer(), nullable=True),
            sa.Column("score_church_vp", sa.Integer(), nullable=True),
            sa.Column("decisions", sa.Integer(), nullable=False),
            sa.Column("duration_s", sa.Float(), nullable=True),
            sa.Column("finished_at", sa.DateTime(timezone=True), nullable=False),
            sa.Column("finished_hour", sa.String(length=13), nullable=False),
            sa.Column("caravel_version", sa.String(length=32), nullable=False),
            sa.Column("experiment", sa.String(length=100), nullable=True),
            sa.PrimaryKeyConstraint("game_id", "seat"),
        )
        op.create_index(
            "ix_analytics_results_experiment",
            "analytics_results",
            ["experiment", "game"],
            unique=False,
        )
        op.create_index(
            "ix_analytics_results_game_finished",
            "analytics_results",
            ["game", "finished_at"],
            unique=False,
        )
        op.create_index(
            op.f("ix_analytics_results_ruleset_hash"),
            "analytics_results",
            ["ruleset_hash"],
            unique=False,
        )
    if "analytics_seat_facts" not in present:
        op.create_table(
            "analytics_seat_facts",
            sa.Column("game_id", sa.String(length=64), nullable=False),
            sa.Column("seat", sa.Integer(), nullable=False),
            sa.Column("kind", sa.String(length=32), nullable=False),
            sa.Column("subject", sa.String(length=64), nullable=False),
            sa.Column("count", sa.Integer(), nullable=False),
            sa.Column("value", sa.Integer(), nullable=False),
            sa.Column("game", sa.String(length=64), nullable=False),
            sa.Column("finished_at", sa.DateTime(timezone=True), nullable=False),
            sa.Column("finished_hour", sa.String(length=13), nullable=False),
            sa.Column("experiment", sa.String(length=100), nullable=True),
            sa.PrimaryKeyConstraint("game_id", "seat", "kind", "subject"),
        )
        op.create_index(
            op.f("ix_analytics_seat_facts_experiment"),
            "analytics_seat_facts",
            ["experiment"],
            unique=False,
        )


def downgrade() -> None:
    op.drop_table("analytics_seat_facts")
    op.drop_table("analytics_results")
    op.drop_table("analytics_experiments")
    op.drop_table("analytics_cells")
