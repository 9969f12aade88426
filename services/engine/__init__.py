"""Engine: the single writer of every game's event log."""

from .worker import Engine

__all__ = ["Engine"]
