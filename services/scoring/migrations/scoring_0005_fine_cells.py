"""The finer analytics cells: the same sums per minute and per second of finish times, so
that a period's ends inside an hour are answered from cells (and under a second of games
from the flat table) instead of a scan of the hour's flat rows.

Revision ID: scoring_0005
Revises: scoring_0004

The table is filled from the flat rows held (every experiment's and the projected
games'), and the hourly cells summed again from it, so that both levels agree from the
start. A database whose table already exists (made from the models) is left as it is.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "scoring_0005"
down_revision: str | None = "scoring_0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    bind = op.get_bind()
    if sa.inspect(bind).has_table("analytics_fine_cells"):
        return
    op.create_table(
        "analytics_fine_cells",
        sa.Column("game", sa.String(length=64), nullable=False),
        sa.Column("grain", sa.String(length=8), nullable=False),
        sa.Column("start", sa.String(length=19), nullable=False),
        sa.Column("experiment", sa.String(length=100), nullable=False),
        sa.Column("ruleset", sa.String(length=200), nullable=False),
        sa.Column("ruleset_hash", sa.String(length=32), nullable=False),
        sa.Column("options", sa.String(length=1000), nullable=False),
        sa.Column("players", sa.Integer(), nullable=False),
        sa.Column("humans", sa.Integer(), nullable=False),
        sa.Column("seat_kind", sa.String(length=32), nullable=False),
        sa.Column("imported", sa.Boolean(), nullable=False),
        sa.Column("dim", sa.String(length=16), nullable=False),
        sa.Column("value", sa.String(length=200), nullable=False),
        sa.Column("n", sa.Integer(), nullable=False),
        sa.Column("wins", sa.Integer(), nullable=False),
        sa.Column("total", sa.BigInteger(), nullable=False),
        sa.Column("squares", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint(
            "game",
            "grain",
            "start",
            "experiment",
            "ruleset",
            "ruleset_hash",
            "options",
            "players",
            "humans",
            "seat_kind",
            "imported",
            "dim",
            "value",
        ),
    )
    from services.scoring import cells  # the sums as the service makes them

    held = sa.text("SELECT DISTINCT experiment FROM analytics_results")
    for (experiment,) in bind.execute(held):
        cells.refresh_all(bind, experiment)


def downgrade() -> None:
    op.drop_table("analytics_fine_cells")
