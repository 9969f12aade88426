"""A test that needs a system program the machine lacks skips, naming it (the README's test
command passes on a fresh machine), unless CARAVEL_REQUIRE_SYSTEM_TOOLS=1 (CI) fails it."""

from __future__ import annotations

import sys

import pytest

from .conftest import REQUIRE_SYSTEM_TOOLS, system_program

ABSENT = "caravel-no-such-program"


def test_a_missing_program_skips_the_test_with_its_name_and_package(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(REQUIRE_SYSTEM_TOOLS, raising=False)
    with pytest.raises(pytest.skip.Exception, match=f"needs {ABSENT}.*apt-get install {ABSENT}"):
        system_program(ABSENT)


def test_ci_turns_the_skip_into_a_failure(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(REQUIRE_SYSTEM_TOOLS, "1")
    with pytest.raises(pytest.fail.Exception, match=f"/nowhere/{ABSENT}"):
        system_program(ABSENT, f"/nowhere/{ABSENT}")


def test_a_present_program_is_found_by_its_path() -> None:
    assert system_program("python", sys.executable) == sys.executable
