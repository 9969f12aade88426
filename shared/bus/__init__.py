"""The bus: stream names, consumer groups, reclaiming and dead letters on Redis Streams."""

from .commands import CommandSender
from .consumer import Delivery, GroupReader, ensure_group
from .keys import Keys

__all__ = ["CommandSender", "Delivery", "GroupReader", "Keys", "ensure_group"]
