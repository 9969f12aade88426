"""A table's edition options become SQLAlchemy's JSON type: the row holds the options, not
text one module encodes and another decodes.

Revision ID: lobby_0003
Revises: lobby_0002

The rows written before hold the same JSON as text: PostgreSQL converts each value
(``::json``); SQLite stores JSON as text anyway, so the table is only re-declared. A column
already of the JSON type (a database made from the models) is left as it is. The tickets'
options stay text: they are a key (tickets match when it is equal), written by
``shared.contracts.key_json``.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from alembic import op

revision = "lobby_0003"
down_revision: str | None = "lobby_0002"
branch_labels = None
depends_on = None


def _retype(to: sa.types.TypeEngine[Any], using: str) -> None:
    bind = op.get_bind()
    types = {c["name"]: c["type"] for c in sa.inspect(bind).get_columns("lobby_tables")}
    if isinstance(types["options"], type(to)):
        return
    with op.batch_alter_table("lobby_tables") as batch:
        batch.alter_column(
            "options",
            type_=to,
            existing_nullable=False,
            postgresql_using=using if bind.dialect.name == "postgresql" else None,
        )


def upgrade() -> None:
    _retype(sa.JSON(), "options::json")


def downgrade() -> None:
    _retype(sa.String(), "options::text")
