"""What the browser tests share: Chromium launched the one way this machine allows (Debian's
build by its path, no background traffic), the watch on every request and console error,
screenshots at both widths, a finished game's log read from the event store, and the public
view a replay must show at a version."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from playwright.async_api import Browser, BrowserContext, ConsoleMessage, Page, Playwright, Route

from shared.eventstore import GameCodec
from shared.games import api
from tests.conftest import system_program

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
    """Debian's Chromium; the test skips (or fails under CARAVEL_REQUIRE_SYSTEM_TOOLS=1)
    without it."""
    path = system_program("chromium", CHROMIUM)
    return await playwright.chromium.launch(executable_path=path, args=CHROMIUM_ARGS)


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


LOCAL = "127.0.0.1"
# Whether a page shows the end, or a move the person can make now.
READY = """() => !document.getElementById('result').hidden
  || document.querySelector('[data-testid=move]:not([disabled])') !== null"""


class Traffic:
    """Every request and socket of a browser context, and its pages' console errors; a
    request to anywhere but this machine is refused (and recorded, so the test fails)."""

    def __init__(self) -> None:
        self.urls: list[str] = []
        self.errors: list[str] = []

    async def watch(self, context: BrowserContext) -> None:
        async def route(r: Route) -> None:
            self.urls.append(r.request.url)
            if urlsplit(r.request.url).hostname == LOCAL:
                await r.continue_()
            else:
                await r.abort()

        await context.route("**/*", route)

    def page(self, page: Page) -> Page:
        page.on("console", self._console)
        page.on("pageerror", lambda error: self.errors.append(f"page error: {error}"))
        page.on("websocket", lambda socket: self.urls.append(socket.url))
        return page

    def _console(self, message: ConsoleMessage) -> None:
        if message.type == "error":
            self.errors.append(f"{message.text} at {message.location.get('url')}")

    def assert_local(self) -> None:
        assert self.urls, "no request was recorded: the check would prove nothing"
        away = [u for u in self.urls if urlsplit(u).hostname != LOCAL]
        assert not away, f"requests left the machine: {away}"


async def shoot(page: Page, name: str) -> None:
    """Screenshots of the page at 1,400 and 390 px, whole page."""
    for label, size in (("1400", WIDE), ("390", NARROW)):
        await page.set_viewport_size(size)
        await page.wait_for_timeout(150)
        await page.screenshot(path=artifacts() / f"{name}-{label}.png", full_page=True)
        width = await page.evaluate("() => document.documentElement.scrollWidth")
        assert width <= size["width"], f"{name} is {width} px wide in a {label} px window"
    await page.set_viewport_size(WIDE)


async def probe(page: Page, expression: str) -> Any:
    return await page.evaluate(f"() => {expression}")
