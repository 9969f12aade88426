"""The bus: stream names, consumer groups, reclaiming and dead letters on Redis Streams,
read through FastStream."""

from .commands import CommandSender
from .connection import connect
from .consumer import Broker, Coalesced, Follower, GroupConsumer, ensure_group
from .faststream_ext import BODY, Delivery
from .keys import Keys, delete_namespace
from .tails import newest_ids

__all__ = [
    "BODY",
    "Broker",
    "Coalesced",
    "CommandSender",
    "Delivery",
    "Follower",
    "GroupConsumer",
    "Keys",
    "connect",
    "delete_namespace",
    "ensure_group",
    "newest_ids",
]
