"""structlog and prometheus-client set-up shared by every service."""

from . import metrics
from .logs import bound, configure_logging

__all__ = ["bound", "configure_logging", "metrics"]
