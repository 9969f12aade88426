"""Alembic's environment, shared by every component's migrations (see :mod:`shared.sql`)."""
