"""``services.children.terminate``: the one way launchers stop what they started."""

from __future__ import annotations

import subprocess
import sys

from services.children import terminate

GRACEFUL = "import time\nwhile True: time.sleep(0.05)"
# Ignores SIGTERM, and says so once it does (so the test never signals it too early).
STUBBORN = (
    "import signal, sys, time\n"
    "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
    "print('ready', flush=True)\n"
    "while True: time.sleep(0.05)"
)


def _started(code: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)


def test_a_process_that_stops_on_sigterm_is_not_killed_and_one_that_ignores_it_is() -> None:
    graceful, stubborn = _started(GRACEFUL), _started(STUBBORN)
    assert stubborn.stdout is not None and stubborn.stdout.readline() == "ready\n"
    codes = terminate([graceful, stubborn], timeout_s=1.0)
    assert codes == [-15, -9]  # SIGTERM's default action; the stubborn one SIGKILLed
    assert graceful.poll() is not None and stubborn.poll() is not None


def test_a_process_already_gone_is_left_alone() -> None:
    done = _started("pass")
    done.wait(timeout=30)
    assert terminate([done], timeout_s=30) == [0]  # its own exit code, not a signal's
