"""Which errors of Redis are transient: the store is away, failing over, resharding or short
of replicas for a while, and the same call will work again shortly.

The HTTP API answers them 503 with ``Retry-After`` (never 500), the rate limiter lets the
request through, and the service loops retry them. Everything else (a wrong type, a script's
own error, a bug) is not transient and stays an error.
"""

from __future__ import annotations

from redis.exceptions import (
    AskError,
    ClusterError,
    ReadOnlyError,
    RedisClusterException,
    ResponseError,
    TryAgainError,
)
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

# Error replies that mean "not now" (redis-py gives most of them a class of their own, but
# not NOREPLICAS: a write refused while a master has fewer replicas than
# ``min-replicas-to-write``; nor UNBLOCKED: a blocking command, such as the lobby's wait for
# the engine's answer, on a master that became a replica, a failover run by hand).
TRANSIENT_REPLIES = (
    "NOREPLICAS",
    "CLUSTERDOWN",
    "TRYAGAIN",
    "MASTERDOWN",
    "LOADING",
    "READONLY",
    "UNBLOCKED",
)

PIPELINE_ERROR = " of pipeline caused error: "

_TRANSIENT_TYPES = (
    RedisConnectionError,  # refused, reset, closed; BusyLoadingError (LOADING) too
    RedisTimeoutError,
    ClusterError,  # CLUSTERDOWN, MASTERDOWN, "TTL exhausted" after MOVED/ASK storms
    AskError,  # MOVED too (its subclass), once redis-py gave up following them
    TryAgainError,  # a multi-key command during a slot's migration
    ReadOnlyError,  # a master that became a replica while the client still wrote to it
    RedisClusterException,  # no node reachable, a slot not covered for now
)


def transient(error: BaseException) -> bool:
    """Whether ``error`` is the store being away for a while, not a mistake: retry it."""
    if isinstance(error, _TRANSIENT_TYPES):
        return True
    if isinstance(error, ResponseError):
        return _reply(error).startswith(TRANSIENT_REPLIES)
    return isinstance(error, AttributeError) and _closed_connection(error)


def _reply(error: ResponseError) -> str:
    """The server's error reply: a pipeline's error names its command first
    (``Command # 1 (HSET k f v) of pipeline caused error: ('NOREPLICAS ...',)``), so a
    NOREPLICAS met in a pipeline was taken for a mistake, and answered 500."""
    head, found, reply = str(error).rpartition(PIPELINE_ERROR)
    return reply.lstrip("('\"") if found and head.startswith("Command # ") else str(error)


def _closed_connection(error: AttributeError) -> bool:
    """redis-py's cluster client closes a node's connections when one of them fails, under
    the feet of the commands using the others: those fail with ``'NoneType' object has no
    attribute 'writelines'`` (or ``read``...), raised inside redis-py itself."""
    if "'NoneType' object has no attribute" not in str(error):
        return False
    frame = error.__traceback__
    last = None
    while frame is not None:
        last = frame
        frame = frame.tb_next
    return last is not None and "/redis/" in last.tb_frame.f_code.co_filename.replace("\\", "/")
