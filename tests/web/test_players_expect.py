"""The web client as a first-time player meets it (issue 28), in Debian's Chromium against
`caravel up`: leaving a game (and a stale seat token) turns the page into the spectator
view at once, with no loop of refused requests; a double click makes one table and the
queue can be cancelled; names are readable (no ``bot:``/``player:`` prefix, no snake_case
id, seats counted from 1, names shown as text); on a 390 px phone the turn banner and the
moves come first, every move button is shown and the board's text is at least 11 px; an
address that names nothing gets a page that says so, with a link home. Screenshots of each
at 1,400 and 390 px go to the artefacts folder."""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
from playwright.async_api import Browser, Page, Response, async_playwright
from redis.asyncio import Redis

from shared.bus import Keys
from tests.lobby.helpers import bearer, running_lobby

from .helpers import NARROW, READY, WIDE, Traffic, artifacts, launch, probe, shoot

SNAKE_ID = re.compile(r"\b[a-z]+_[a-z_]+\b")
PREFIXED = re.compile(r"\b(bot|player):")


class Statuses:
    """Every answer a page got: (status, method, path)."""

    def __init__(self) -> None:
        self.seen: list[tuple[int, str, str]] = []

    def watch(self, page: Page) -> Page:
        page.on("response", self._record)
        return page

    def _record(self, response: Response) -> None:
        path = response.url.split("//", 1)[1].split("/", 1)[1].split("?")[0]
        self.seen.append((response.status, response.request.method, f"/{path}"))

    def count(self, status: int) -> int:
        return sum(1 for s, _, _ in self.seen if s == status)


@asynccontextmanager
async def browsing(
    redis_url: str, keys: Keys, tmp_path: Path, **settings: str
) -> AsyncIterator[tuple[httpx.AsyncClient, Browser, Traffic]]:
    database = f"sqlite:///{tmp_path / 'lobby.db'}"
    async with (
        running_lobby(redis_url, keys, database, tmp_path / "data", **settings) as client,
        async_playwright() as playwright,
    ):
        browser = await launch(playwright)
        traffic = Traffic()
        try:
            yield client, browser, traffic
        finally:
            await browser.close()
    assert traffic.errors == [], traffic.errors
    traffic.assert_local()


async def new_page(browser: Browser, traffic: Traffic, base: str) -> Page:
    context = await browser.new_context(viewport=WIDE, base_url=base)
    await traffic.watch(context)
    page = traffic.page(await context.new_page())
    page.on("dialog", lambda dialog: dialog.accept())  # "Leave this game?": yes
    return page


async def seated_table(client: httpx.AsyncClient, name: str = "Ana") -> tuple[str, dict[str, Any]]:
    """A running Age of Discovery table: ``name`` at seat 1, greedy bots at the others."""
    bots = {"1": "greedy", "2": "greedy", "3": "random"}
    table = (await client.post("/tables", json={"seats": 4, "bots": bots})).json()["id"]
    joined = (await client.post(f"/tables/{table}/join", json={"name": name})).json()
    started = await client.post(f"/tables/{table}/start", headers=bearer(joined["token"]))
    assert started.status_code in (200, 202), started.text
    return table, joined


async def hold_seat(page: Page, table: str, joined: dict[str, Any], name: str = "Ana") -> None:
    """The browser holds the seat as if it had joined from the page."""
    seat = {"seat": joined["seat"], "token": joined["token"], "name": name}
    await page.goto("/")
    await page.evaluate(
        "([key, value]) => localStorage.setItem(key, value)",
        [f"caravel.seat.{table}", json.dumps(seat)],
    )


async def refused_reads(statuses: Statuses) -> int:
    return sum(1 for s, _, path in statuses.seen if s in (401, 403) and path.endswith("/view"))


async def test_leaving_turns_the_page_into_the_spectator_view_with_no_request_loop(
    redis: Redis, redis_url: str, keys: Keys, tmp_path: Path
) -> None:
    """Leave in a running game: the token is forgotten, the page says the person watches,
    the game goes on (a bot plays the seat) and the page follows it with public reads; no
    more than the one refused read the leave causes. A reload shows the spectator view; a
    token of another table in storage is dropped the same way."""
    async with browsing(redis_url, keys, tmp_path, bot_think_ms="20") as (client, browser, traffic):
        base = str(client.base_url).rstrip("/")
        table, joined = await seated_table(client)
        page = await new_page(browser, traffic, base)
        statuses = Statuses()
        statuses.watch(page)
        await hold_seat(page, table, joined)
        await page.goto(f"/tables/{table}")
        await page.wait_for_function(READY, timeout=60_000)
        assert "You play seat 1" in await page.locator("#status").inner_text()
        left_at = await probe(page, "window.__caravel.view.version")
        await page.click("[data-testid=leave]")
        await page.wait_for_function("() => window.__caravel.spectated === 1")
        await page.wait_for_function("() => window.__caravel.seat === null")
        assert "watching" in await page.locator("#status").inner_text()
        assert await probe(page, f"localStorage.getItem('caravel.seat.{table}')") is None
        # The game goes on without the person: the page follows it (a bot plays the seat).
        await page.wait_for_function(
            f"() => window.__caravel.view.version >= {left_at + 8}", timeout=60_000
        )
        assert await page.locator("[data-testid=move]").count() == 0
        assert "watching" in await page.locator("#moves").inner_text()  # not "join a seat"
        await page.wait_for_function(  # a spectator sees the clock of the seat to play
            "() => /^[0-9]+:[0-5][0-9]$/.test(document.querySelector('[data-testid=clock]')"
            "?.textContent ?? '')"
        )
        assert await refused_reads(statuses) <= 1, statuses.seen
        await shoot(page, "table-after-leaving")
        await page.reload()
        await page.wait_for_function("() => window.__caravel.view !== null")
        assert "watching" in await page.locator("#status").inner_text()

        # A token of another table (or one expired) in storage: dropped on the first read.
        other, other_seat = await seated_table(client, "Bo")
        stale = Statuses()
        tab = stale.watch(await new_page(browser, traffic, base))
        await hold_seat(tab, table, other_seat, "Bo")
        await tab.goto(f"/tables/{table}")
        await tab.wait_for_function("() => window.__caravel.spectated === 1")
        await tab.wait_for_function("() => window.__caravel.view !== null")
        version = await probe(tab, "window.__caravel.view.version")
        # The page follows the game on: a few versions on, or to its end (the bots play fast,
        # and the first table's game may end before this second page opens).
        await tab.wait_for_function(
            f"() => window.__caravel.view.version > {version + 3}"
            " || window.__caravel.view.phase === 'over'"
        )
        assert await refused_reads(stale) <= 1, stale.seen
        assert await probe(tab, f"localStorage.getItem('caravel.seat.{table}')") is None
        assert other != table
        assert all("status of 403" in e for e in traffic.errors), traffic.errors
        traffic.errors.clear()  # the browser's own notes of the (at most two) refused reads


async def test_a_double_click_makes_one_table_and_the_queue_can_be_cancelled(
    redis: Redis, redis_url: str, keys: Keys, tmp_path: Path
) -> None:
    async with browsing(redis_url, keys, tmp_path, match_wait_s="3600") as (
        client,
        browser,
        traffic,
    ):
        base = str(client.base_url).rstrip("/")
        page = await new_page(browser, traffic, base)
        statuses = Statuses()
        statuses.watch(page)
        await page.goto("/")
        await page.locator("#seat-kinds select").nth(3).wait_for()
        await page.fill("#create input[name=name]", "Ana")
        await page.dblclick("#create button[type=submit]")
        await page.wait_for_url("**/tables/t-*")
        made = [p for s, m, p in statuses.seen if m == "POST" and p == "/tables"]
        assert made == ["/tables"], statuses.seen
        tables = [
            t
            for status in ("open", "running", "finished")
            for t in (await client.get("/tables", params={"status": status})).json()
        ]
        assert len(tables) == 1, tables

        # The queue: Find a game (twice, quickly), then Cancel: one ticket, gone.
        await page.goto("/")
        await page.fill("#quick input[name=name]", "Cy")
        await page.fill("#quick input[name=players]", "4")
        await page.dblclick("#quick button[type=submit]")
        await page.locator("#quick-cancel").wait_for()
        assert "Waiting" in await page.locator("#quick-status").inner_text()
        await shoot(page, "home-queued")
        await page.click("#quick-cancel")
        await page.wait_for_function(
            "() => document.querySelector('#quick-status').textContent.includes('left')"
        )
        assert await page.locator("#quick-cancel").is_hidden()
        queued = [p for s, m, p in statuses.seen if m == "POST" and p == "/queue"]
        cancelled = [(s, p) for s, m, p in statuses.seen if m == "DELETE"]
        assert len(queued) == 1 and len(cancelled) == 1 and cancelled[0][0] == 204
        ticket = cancelled[0][1].rsplit("/", 1)[1]
        assert (await client.get(f"/queue/{ticket}")).status_code == 404


async def test_names_are_readable_and_shown_as_text(
    redis: Redis, redis_url: str, keys: Keys, tmp_path: Path
) -> None:
    """A finished game's result and the leaderboard name players without prefixes; the
    options and the seats use words, not ids; a name with HTML and a bidi override is shown
    as the text typed, without the override; refusals count seats from 1."""
    async with browsing(redis_url, keys, tmp_path, bot_think_ms="10") as (client, browser, traffic):
        base = str(client.base_url).rstrip("/")
        bots = {"0": "greedy", "1": "random"}
        game = (await client.post("/tables", json={"seats": 2, "bots": bots})).json()["id"]
        page = await new_page(browser, traffic, base)
        await page.goto(f"/tables/{game}")
        await page.locator("#result").wait_for(timeout=120_000)
        await page.locator("[data-testid=result-row]").first.wait_for()
        result = await page.locator("#result").inner_text()
        assert "Greedy bot" in result and not PREFIXED.search(result), result
        assert not SNAKE_ID.search(result), result
        moves = await page.locator("#moves").inner_text()
        assert "Join a seat" not in moves
        await shoot(page, "table-result")

        await page.goto("/")
        await page.wait_for_function(
            "() => !document.querySelector('#leaders').textContent.includes('Loading')"
        )
        await page.locator("#leaders table").wait_for(timeout=30_000)
        leaders = await page.locator("#leaders").inner_text()
        assert "Greedy bot" in leaders and not PREFIXED.search(leaders), leaders
        await page.locator("#options select").first.wait_for()
        options = await page.locator("#create").inner_text()
        assert not SNAKE_ID.search(options), options
        assert "Greedy bot" in options

        # A name with HTML and a bidi override: joined as text, the override gone.
        two = {"seats": 2, "bots": {"1": "greedy"}}
        open_table = (await client.post("/tables", json=two)).json()
        typed = "<b>Eve</b>\u202emoc.evil"
        await page.goto(f"/tables/{open_table['id']}")
        await page.fill("#join input[name=name]", typed)
        await page.click("#join button:has-text('Join')")
        await page.locator("#join h2:has-text('You hold seat 1')").wait_for()
        seats = await page.locator("[data-testid=seat-list]").inner_text()
        assert "Seat 1: <b>Eve</b>moc.evil" in seats and "Seat 2: Greedy bot 2" in seats
        assert await page.locator("[data-testid=seat-list] b").count() == 0
        taken = (await client.get(f"/tables/{open_table['id']}")).json()["taken"]
        assert taken[0]["name"] == "<b>Eve</b>moc.evil"
        invite = await page.locator("[data-testid=invite]").input_value()
        assert invite == f"{base}/tables/{open_table['id']}"
        await shoot(page, "table-open-seated")

        # A refusal counts seats from 1, as the page does (the API's message: from 0).
        refusal = await page.evaluate(
            """async (text) => (await import('/static/js/dom.js')).forPeople(text)""",
            "seat 0 has nothing to decide; waiting for seat 1 (place); seats [0, 2] are free",
        )
        assert refusal == (
            "seat 1 has nothing to decide; waiting for seat 2 (place); seats 1, 3 are free"
        )


async def test_a_phone_shows_the_turn_and_every_move_first_and_readable_board_text(
    redis: Redis, redis_url: str, keys: Keys, tmp_path: Path
) -> None:
    """At 390 px, at the person's turn: the banner and the moves come before the board, no
    move button is cut off, and the board's smallest text is at least 11 px on screen."""
    async with browsing(redis_url, keys, tmp_path, bot_think_ms="20") as (client, browser, traffic):
        base = str(client.base_url).rstrip("/")
        table, joined = await seated_table(client)
        page = await new_page(browser, traffic, base)
        await page.set_viewport_size(NARROW)
        await hold_seat(page, table, joined)
        await page.goto(f"/tables/{table}")
        most = 0
        for _ in range(6):  # a few of the person's turns, the one with most moves kept
            await page.wait_for_function(READY, timeout=60_000)
            if await page.locator("#result").is_visible():
                break
            checked = await check_phone_layout(page)
            if checked > most:
                most = checked
                await page.screenshot(path=_artifact("table-phone-390.png"), full_page=True)
            buttons = page.locator("[data-testid=move]:not([disabled])")
            if await buttons.count():
                await buttons.last.click()
        assert most >= 2
        await page.set_viewport_size(WIDE)
        await page.screenshot(path=_artifact("table-phone-1400.png"), full_page=True)


def _artifact(name: str) -> Path:
    return artifacts() / name


async def check_phone_layout(page: Page) -> int:
    """Assert the phone layout at a turn; return the number of move buttons."""
    layout: dict[str, Any] = await page.evaluate(
        """() => {
          const top = (sel) => document.querySelector(sel).getBoundingClientRect().top;
          const box = document.querySelector('#moves');
          const sizes = [...document.querySelectorAll('#board svg text')]
            .filter((t) => t.textContent.trim() && t.getBBox().width > 0)
            .map((t) => parseFloat(getComputedStyle(t).fontSize) * t.getScreenCTM().a);
          const buttons = [...box.querySelectorAll('button')].map((b) => {
            const r = b.getBoundingClientRect(), end = box.getBoundingClientRect().bottom;
            return r.width > 0 && r.height > 0 && r.bottom <= end + 1;
          });
          return { turn: top('#turn'), moves: top('#moves'), board: top('#board'),
                   clipped: box.scrollHeight > box.clientHeight + 1, buttons,
                   smallest: Math.min(...sizes), texts: sizes.length,
                   width: document.documentElement.scrollWidth };
        }"""
    )
    assert layout["turn"] < layout["moves"] < layout["board"], layout
    assert not layout["clipped"] and all(layout["buttons"]), layout
    assert layout["texts"] > 10 and layout["smallest"] >= 11 - 1e-6, layout
    assert layout["width"] <= NARROW["width"], layout
    return len(layout["buttons"])


async def test_addresses_that_name_nothing_get_a_page_with_a_link_home(
    redis: Redis, redis_url: str, keys: Keys, tmp_path: Path
) -> None:
    """An unknown table, an unknown game's replay, a game's address and any unknown page:
    a browser gets a page saying so with a link home; API clients still get JSON."""
    async with browsing(redis_url, keys, tmp_path) as (client, browser, traffic):
        base = str(client.base_url).rstrip("/")
        page = await new_page(browser, traffic, base)
        statuses = Statuses()
        statuses.watch(page)
        for path, shot in (
            ("/tables/doesnotexist", "not-found-table"),
            ("/games/xyz/replay", "not-found-replay"),
            ("/games/xyz", None),
            ("/no/such/page", "not-found-page"),
        ):
            await page.goto(path)
            await page.locator("[data-testid=not-found]").wait_for()
            link = page.locator("[data-testid=home-link]")
            assert await link.get_attribute("href") == "/"
            assert await page.locator("#controls:visible").count() == 0  # no dead controls
            if shot:
                await shoot(page, shot)
        await page.click("[data-testid=home-link]")
        await page.locator("#catalog .card").first.wait_for()
        assert Counter(s for s, _, p in statuses.seen if p == "/no/such/page") == {404: 1}
        api = await client.get("/games/xyz", headers={"Accept": "application/json"})
        assert api.status_code == 404 and api.json()["code"] == "not_found"
        table = await client.get("/tables/doesnotexist")
        assert table.status_code == 404 and table.json()["code"] == "unknown_table"
        assert all("404 (Not Found)" in e for e in traffic.errors), traffic.errors
        traffic.errors.clear()  # the browser's own notes of the 404 answers
