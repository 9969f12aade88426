"""Fixtures of the backbone tests that more than one module uses."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.cluster import LocalCluster, redis_server

from ..conftest import missing_program


@pytest.fixture
def cluster() -> Iterator[LocalCluster]:
    """A local 3+3 Redis Cluster whose masters refuse writes without a replica
    (``min-replicas-to-write 1``), as the cluster overlay runs it with durability on."""
    server = redis_server()
    if server is None:
        missing_program("redis-server", "redis-server 7 or later")
    local = LocalCluster(server, options=("--min-replicas-to-write", "1")).start()
    try:
        yield local
    finally:
        local.stop()
