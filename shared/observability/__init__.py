"""structlog and prometheus-client set-up shared by every service."""

from . import metrics
from .logs import configure_logging

__all__ = ["configure_logging", "metrics"]
