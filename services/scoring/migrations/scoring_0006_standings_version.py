"""The standings lose their own ``version``: a seat's standing is the game's row's version's.

Revision ID: scoring_0006
Revises: scoring_0005

Scoring wrote every seat's standing again in every batch that moved its game, only for a
new ``version``, though most batches change no seat's score (issue 24). A standing row is
now written when the seat's score changes, in the transaction of the game's row, which
carries the version (the standings route reads it there, as it did). Nothing read the
column. A downgrade puts it back with each game's version. A database whose table lacks
it already (made from the models) is left as it is.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "scoring_0006"
down_revision: str | None = "scoring_0005"
branch_labels = None
depends_on = None


def _has_version() -> bool:
    columns = sa.inspect(op.get_bind()).get_columns("scoring_standings")
    return any(c["name"] == "version" for c in columns)


def upgrade() -> None:
    if not _has_version():
        return
    with op.batch_alter_table("scoring_standings") as batch:
        batch.drop_column("version")


def downgrade() -> None:
    with op.batch_alter_table("scoring_standings") as batch:
        batch.add_column(sa.Column("version", sa.Integer(), nullable=False, server_default="0"))
    op.execute(
        "UPDATE scoring_standings SET version = (SELECT version FROM scoring_games"
        " WHERE scoring_games.game_id = scoring_standings.game_id)"
    )
    with op.batch_alter_table("scoring_standings") as batch:
        batch.alter_column("version", server_default=None, existing_type=sa.Integer())
