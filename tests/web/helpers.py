"""What the browser tests share: Chromium launched the one way this machine allows (Debian's
build by its path, no background traffic), a finished game's log read from the event store,
and the public view a replay must show at a version."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from playwright.async_api import Browser, Playwright

from shared.eventstore import GameCodec
from shared.games import api

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
WIDE = {"width": 1400, "height": 900}
NARROW = {"width": 390, "height": 844}


def artifacts() -> Path:
    """Where the tests write screenshots (git-ignored): CARAVEL_TEST_ARTIFACTS, or
    ``artifacts/web`` in the repository."""
    default = Path(__file__).resolve().parents[2] / "artifacts" / "web"
    folder = Path(os.environ.get("CARAVEL_TEST_ARTIFACTS", default))
    folder.mkdir(parents=True, exist_ok=True)
    return folder


async def launch(playwright: Playwright) -> Browser:
    return await playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)


async def eventually(check: Callable[[], Awaitable[Any]], timeout_s: float = 60) -> Any:
    """``check``'s first truthy answer, polled until ``timeout_s``."""
    deadline = asyncio.get_running_loop().time() + timeout_s
    while True:
        answer = await check()
        if answer:
            return answer
        assert asyncio.get_running_loop().time() < deadline, "timed out"
        await asyncio.sleep(0.1)


def public_view_at(log: list[Any], version: int) -> dict[str, Any]:
    """The spectator's view after ``version`` events, computed here from the whole log."""
    state = GameCodec().replay(log[:version])
    view = api.of(state).view(state, None)
    view["version"] = version
    return view
