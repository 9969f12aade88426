"""The bus: stream names, consumer groups, reclaiming and dead letters on Redis Streams."""

from .commands import CommandSender
from .connection import connect
from .consumer import Delivery, GroupReader, ensure_group
from .keys import Keys, delete_namespace

__all__ = [
    "CommandSender",
    "Delivery",
    "GroupReader",
    "Keys",
    "connect",
    "delete_namespace",
    "ensure_group",
]
