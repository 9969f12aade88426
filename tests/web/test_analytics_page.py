"""The analytics page in Chromium: filters change the figures, every rate has its whisker and
n, labels are the game's words (no snake_case id), experiments compare side by side, and
the page is readable at 390 px with no console error and no request off the machine."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

from playwright.async_api import Page, Route, async_playwright, expect

from services.lab import LabRun, run_lab
from services.lobby.db import make_engine
from shared.bus import Keys
from tests.lobby.helpers import running_lobby

from .helpers import WIDE, Traffic, launch, shoot

SNAKE = re.compile(r"\b[a-z0-9]+_[a-z0-9_]+\b")
AOD = "age_of_discovery"


async def summary(page: Page) -> str:
    return await page.locator("#summary").inner_text()


def _figures_of_low(url: str) -> bool:
    return "/analytics/figures?" in url and "experiment=low" in url


async def test_the_analytics_page_filters_draws_whiskers_and_compares(
    redis_url: str, keys: Keys, tmp_path: Path
) -> None:
    database = f"sqlite:///{tmp_path / 'lab.db'}"
    db = make_engine(database)
    for name, games, income in (("low", 6, "25"), ("high", 4, "30")):
        run = LabRun(AOD, ("greedy",) * 4, games, name, options={"factory_income": income})
        run_lab(LabRun(**{**run.__dict__, "workers": 1}), db)
    db.dispose()
    async with (
        running_lobby(redis_url, keys, database, tmp_path / "data") as client,
        async_playwright() as playwright,
    ):
        base = str(client.base_url).rstrip("/")
        browser = await launch(playwright)
        context = await browser.new_context(viewport=WIDE)
        traffic = Traffic()
        await traffic.watch(context)
        page = traffic.page(await context.new_page())
        await page.goto(f"{base}/analytics?game={AOD}")
        await page.wait_for_function(
            "() => document.getElementById('summary').textContent.includes('finished games')"
        )
        assert (await summary(page)).startswith("10 finished games")
        assert await page.locator("h1").inner_text() == "Analytics: The Age of Discovery"
        rows = page.locator("[data-testid=figure]")
        assert await rows.count() > 10
        whiskers = await page.locator("svg line.whisker").count()
        assert whiskers >= 3 * await rows.count()  # a whisker (three lines) on every row
        first = await rows.first.inner_text()
        assert "1st to play" in first and "(n=10)" in first
        text = await page.locator("main").inner_text()
        assert "Rio de la Plata" in text or "Settlers" in text  # the ruleset's names
        assert not SNAKE.findall(text), SNAKE.findall(text)

        await page.select_option("[data-testid=filter-experiment]", "high")
        await page.wait_for_function(
            "() => document.getElementById('summary').textContent.startsWith('4 finished')"
        )
        assert "(n=4)" in await rows.first.inner_text()
        await page.select_option('[data-testid="filter-option:factory_income"]', "25")
        await page.wait_for_function(
            "() => document.getElementById('summary').textContent.startsWith('0 finished')"
        )
        await page.select_option('[data-testid="filter-option:factory_income"]', "")
        await page.wait_for_function(
            "() => document.getElementById('summary').textContent.startsWith('4 finished')"
        )
        imported = page.locator("[data-testid=filter-imported]")
        assert await imported.input_value() == "exclude"  # imported games left out at first
        await page.select_option("[data-testid=filter-imported]", "only")  # none imported
        await page.wait_for_function(
            "() => document.getElementById('summary').textContent.startsWith('0 finished')"
        )
        await page.select_option("[data-testid=filter-imported]", "include")
        await page.wait_for_function(
            "() => document.getElementById('summary').textContent.startsWith('4 finished')"
        )
        # The figures of experiment low alone, asked for before the comparison, are answered
        # after it: the page draws the last choice, not the last answer (it drew that one).
        asked, release = asyncio.Event(), asyncio.Event()

        async def hold(route: Route) -> None:
            asked.set()
            await release.wait()
            await route.continue_()

        await page.route(_figures_of_low, hold)
        await page.select_option("[data-testid=filter-experiment]", "low")
        await asyncio.wait_for(asked.wait(), 30)
        await page.select_option("[data-testid=filter-compare]", "high")
        await page.wait_for_function(
            "() => document.getElementById('summary').textContent.includes('B: experiment high')"
        )
        async with page.expect_response(lambda r: _figures_of_low(r.url)) as answered:
            release.set()
        await (await answered.value).finished()
        await page.evaluate("() => new Promise((done) => setTimeout(done))")  # it was read
        await expect(page.locator("#summary")).to_contain_text("B: experiment high")
        await expect(page.locator("#summary")).to_contain_text("Holm-Bonferroni")
        compared = await rows.first.inner_text()
        assert "A " in compared and "B " in compared and "(n=6)" in compared
        assert "(n=4)" in compared and "95% interval" in compared
        assert await page.locator("svg rect.bar.b").count() > 0
        text = await page.locator("main").inner_text()
        assert not SNAKE.findall(text), SNAKE.findall(text)
        await shoot(page, "analytics")
        assert traffic.errors == []
        traffic.assert_local()
        await browser.close()


async def test_the_analytics_page_counts_games_as_they_end_and_links_back(
    redis_url: str, keys: Keys, tmp_path: Path
) -> None:
    """Games recorded while the page is open show without a reload (the page asks again
    every REFRESH_MS); the site's header leads back home, and the export links carry the
    page's filters."""
    database = f"sqlite:///{tmp_path / 'lab.db'}"
    db = make_engine(database)
    run_lab(LabRun(AOD, ("greedy",) * 4, 2, "first", workers=1), db)
    async with (
        running_lobby(redis_url, keys, database, tmp_path / "data") as client,
        async_playwright() as playwright,
    ):
        base = str(client.base_url).rstrip("/")
        browser = await launch(playwright)
        traffic = Traffic()
        context = await browser.new_context(viewport=WIDE)
        await traffic.watch(context)
        page = traffic.page(await context.new_page())
        await page.goto(f"{base}/analytics?game={AOD}")
        await expect(page.locator("#summary")).to_contain_text("2 finished games")
        home = page.locator("header.top a.brand")
        assert await home.get_attribute("href") == "/"
        assert await page.locator("header.top nav a[aria-current=page]").inner_text() == "Analytics"
        await page.select_option("[data-testid=filter-experiment]", "first")
        await expect(page.locator("#export-csv")).to_have_attribute(
            "href", re.compile(r"format=csv&.*experiment=first")
        )
        await page.select_option("[data-testid=filter-experiment]", "")
        await asyncio.to_thread(run_lab, LabRun(AOD, ("greedy",) * 4, 1, "later", workers=1), db)
        await expect(page.locator("#summary")).to_contain_text("3 finished games", timeout=60_000)
        assert traffic.errors == []
        traffic.assert_local()
        await browser.close()
    db.dispose()
