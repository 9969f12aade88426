"""The service loops' retry rule (``shared.loops.keep_running``), on its own: no I/O."""

from __future__ import annotations

import asyncio

import structlog

from shared.loops import Backoff, keep_running

log = structlog.get_logger("tests.loops")


async def test_a_round_failing_twenty_times_in_a_row_logs_five_lines_and_one_traceback() -> None:
    """A loop whose round fails 20 times in a row (a Redis away) logs the 1st failure with
    its traceback and then only the 2nd, 4th, 8th and 16th, each as one line with its
    count; a success ends the run, so the next failure is logged with its traceback again."""
    stop = asyncio.Event()
    rounds = 0

    async def round_() -> None:
        nonlocal rounds
        rounds += 1
        if rounds == 21:
            return
        if rounds == 23:
            stop.set()
        raise ConnectionError(f"refused {rounds}")

    with structlog.testing.capture_logs() as logs:
        await keep_running(stop, round_, log, "round failed", backoff=Backoff(0.0, 0.0))
    lines = [line for line in logs if line["event"] == "round failed"]
    assert [line["failures"] for line in lines] == [1, 2, 4, 8, 16, 1, 2]
    assert [line.get("exc_info", False) for line in lines] == [
        True,
        False,
        False,
        False,
        False,
        True,
        False,
    ]
    assert lines[1]["error"] == "ConnectionError('refused 2')"
