"""The analytics page in Chromium: filters change the figures, every rate has its whisker and
n, labels are the game's words (no snake_case id), experiments compare side by side, and
the page is readable at 390 px with no console error and no request off the machine."""

from __future__ import annotations

import re
from pathlib import Path

from playwright.async_api import Page, async_playwright

from services.lab import LabRun, run_lab
from services.lobby.db import make_engine
from shared.bus import Keys
from tests.lobby.helpers import running_lobby

from .helpers import WIDE, Traffic, launch, shoot

SNAKE = re.compile(r"\b[a-z0-9]+_[a-z0-9_]+\b")
AOD = "age_of_discovery"


async def summary(page: Page) -> str:
    return await page.locator("#summary").inner_text()


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
        await page.select_option("[data-testid=filter-experiment]", "low")
        await page.select_option("[data-testid=filter-compare]", "high")
        await page.wait_for_function(
            "() => document.getElementById('summary').textContent.includes('B: experiment high')"
        )
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
