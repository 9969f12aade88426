"""Settings: the seat-token key kept in the data folder."""

from __future__ import annotations

import os
import stat
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from threading import Barrier

import pytest

from shared.settings import Settings


def test_the_kept_secret_is_private_from_its_creation(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The key file is never readable by others, not even for a moment: it is born with mode
    0600 (under a umask that gives other new files 0644), no chmod needed afterwards."""

    def chmod(*args: object, **kwargs: object) -> None:
        raise AssertionError("the secret was created readable, then restricted")

    monkeypatch.setattr(os, "chmod", chmod)
    old = os.umask(0o022)
    try:
        key = Settings(data_dir=tmp_path / "data").signing_key()
    finally:
        os.umask(old)
    path = tmp_path / "data" / "secret"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert len(key) == 64 and key == path.read_bytes().strip()
    assert [p.name for p in path.parent.iterdir()] == ["secret"]  # no leftovers


def test_processes_making_the_secret_at_once_all_get_the_same_key(tmp_path: Path) -> None:
    """Two lobbies started together on a fresh data folder each make a key: the one that
    loses the race uses the winner's, so tokens signed by one verify in the other."""
    racers = 8
    start = Barrier(racers)

    def make() -> bytes:
        start.wait()
        return Settings(data_dir=tmp_path).signing_key()

    with ThreadPoolExecutor(racers) as pool:
        keys = list(pool.map(lambda _: make(), range(racers)))
    assert len(set(keys)) == 1 and len(keys[0]) == 64
    assert Settings(data_dir=tmp_path).signing_key() == keys[0]
