"""The scoring tables' JSON columns (a game's winners, each seat's breakdown and tie-break
keys) become SQLAlchemy's JSON type: the rows hold values, not text one module encodes and
another decodes.

Revision ID: scoring_0003
Revises: scoring_0002

The rows written before hold the same JSON as text: PostgreSQL converts each value
(``::json``, which keeps an object's key order, the breakdown's order); SQLite stores JSON as
text anyway, so its tables are only re-declared. A column already of the JSON type (a
database made from the models) is left as it is.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from alembic import op

revision = "scoring_0003"
down_revision: str | None = "scoring_0002"
branch_labels = None
depends_on = None

COLUMNS = {
    "scoring_games": {"winners": True},
    "scoring_standings": {"breakdown": False},
    "scoring_results": {"breakdown": False, "tiebreak": False},
}
"""The columns by table, each with whether it may be null."""


def _retype(to: sa.types.TypeEngine[Any], using: str) -> None:
    inspector = sa.inspect(op.get_bind())
    postgres = op.get_bind().dialect.name == "postgresql"
    for table, columns in COLUMNS.items():
        types = {c["name"]: c["type"] for c in inspector.get_columns(table)}
        todo = [n for n in columns if not isinstance(types[n], type(to))]
        if not todo:
            continue
        with op.batch_alter_table(table) as batch:
            for name in todo:
                batch.alter_column(
                    name,
                    type_=to,
                    existing_nullable=columns[name],
                    postgresql_using=using.format(name) if postgres else None,
                )


def upgrade() -> None:
    _retype(sa.JSON(), "{}::json")


def downgrade() -> None:
    _retype(sa.String(), "{}::text")
