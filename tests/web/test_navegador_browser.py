"""Navegador in a real browser (Debian's Chromium, driven by Playwright) against `caravel up`:
a person creates a table of three on the home page (a greedy and a random bot beside them)
and plays by clicking, on the move buttons and on the board's rondel fields and regions, for
a time budget (to the end if it comes first). Whenever it is the person's turn, the board
shows what `/games/{id}/view` says: every player's money and rondel stone, the market
markers, the building prices, the reachable rondel fields with their cost. No page logs an
error; every request goes to 127.0.0.1. Screenshots at 1,400 and 390 px go to artifacts."""

from __future__ import annotations

import random
import time
from pathlib import Path
from typing import Any

import httpx
from playwright.async_api import Page, async_playwright
from redis.asyncio import Redis

from shared.bus import Keys
from tests.lobby.helpers import running_lobby

from .helpers import READY, WIDE, Traffic, launch, probe, shoot

PLAY_BUDGET_S = 50  # playing time; the game ends sooner or the person has made many moves


async def create_table(page: Page, base: str) -> str:
    """The home page's form: Navegador, three seats (the person, a greedy and a random bot)."""
    await page.goto(f"{base}/")
    await page.locator("#catalog .card").first.wait_for()
    await page.select_option("#create select[name=game]", "navegador")
    await page.fill("#create input[name=seats]", "3")
    await page.press("#create input[name=seats]", "Tab")  # the change redraws the seats
    await page.locator("#seat-kinds select").nth(2).wait_for()
    assert await page.locator("#seat-kinds select").count() == 3
    await page.select_option("#seat-kinds select[data-seat='1']", "bot:greedy")
    await page.select_option("#seat-kinds select[data-seat='2']", "bot:random")
    await page.fill("#create input[name=name]", "Ana")
    await page.click("#create button[type=submit]")
    await page.wait_for_url("**/tables/t-*")
    return page.url.rsplit("/", 1)[1]


async def assert_board_shows(page: Page, client: httpx.AsyncClient, game_id: str) -> dict[str, Any]:
    """At the person's turn (nothing moves until they do), the page's view is the API's, and
    the drawing shows its numbers and the board's borders. Returns the view."""
    token = await probe(page, f"JSON.parse(localStorage.getItem('caravel.seat.{game_id}')).token")
    answer = await client.get(
        f"/games/{game_id}/view", headers={"Authorization": f"Bearer {token}"}
    )
    view: dict[str, Any] = answer.json()
    assert await probe(page, "window.__caravel.view") == view
    for player in view["players"]:
        sheet = page.locator(f"#players article[data-seat='{player['seat']}']")
        money = await sheet.locator("dd[data-field=money]").inner_text()
        assert money == f"${player['money']}", (player["seat"], money)
        workers = await sheet.locator("dd[data-field=workers]").inner_text()
        assert workers == str(player["workers"])
        stones = page.locator(f"#board [data-stone='{player['seat']}']")
        if player["stone"] is None:
            assert await stones.count() == 0
        else:
            field = await stones.locator("xpath=..").get_attribute("data-field")
            assert field == str(player["stone"]), (player["seat"], field)
    for row in view["market"]:
        marker = page.locator(f"#board [data-market='{row['good']}']")
        assert await marker.get_attribute("data-row") == str(row["row"])
    for track in view["buildings"]:
        price = page.locator(f"#board [data-target='building:{track['id']}'] [data-price]")
        assert await price.get_attribute("data-price") == str(track["price"] or "")
    holder = await page.locator("#board [data-holder]").get_attribute("data-holder")
    assert holder == str(view["card"]["holder"])
    borders = page.locator("#board [data-border]")
    drawn = {
        await borders.nth(i).get_attribute("data-border") for i in range(await borders.count())
    }
    assert drawn == {f"{a}|{b}" for a, b in view["board"]["borders"]}
    me = view["players"][view["seat"]]
    fields, free = len(view["rondel"]), view["board"]["free_steps"]
    for command in view["legal_commands"]:
        if command["type"] != "rondel":
            continue
        part = page.locator(f"#board [data-target='rondel:{command['field']}']")
        assert "target" in (await part.get_attribute("class") or "")
        here = me["stone"]
        steps = (command["field"] - here) % fields or fields if here is not None else 0
        cost = await part.locator("[data-cost]").get_attribute("data-cost")
        assert cost == str(max(0, steps - free)), (command, here, cost)
    return view


async def click_on_the_board(page: Page, rnd: random.Random) -> bool:
    """Click a highlighted part of the board (a rondel field, a region, a market column...):
    it plays its one move, or picks its moves in the list and focuses the first, which Enter
    plays. False when no part is highlighted."""
    targets = page.locator("#board .target")
    count = await targets.count()
    if not count:
        return False
    await targets.nth(rnd.randrange(count)).click()
    await page.keyboard.press("Enter")
    return True


async def test_a_person_plays_navegador_by_clicking(
    redis_url: str, keys: Keys, redis: Redis, tmp_path: Path
) -> None:
    database = f"sqlite:///{tmp_path / 'lobby.db'}"
    rnd = random.Random(5)
    async with (
        running_lobby(redis_url, keys, database, tmp_path / "data", bot_think_ms="20") as client,
        async_playwright() as playwright,
    ):
        base = str(client.base_url).rstrip("/")
        browser = await launch(playwright)
        traffic = Traffic()
        context = await browser.new_context(viewport=WIDE)
        await traffic.watch(context)
        page = traffic.page(await context.new_page())
        game_id = await create_table(page, base)
        table = (await client.get(f"/tables/{game_id}")).json()
        assert table["game"] == "navegador"
        assert [s["name"] for s in table["taken"]] == ["Ana", "Greedy bot 2", "Random bot 3"]

        moves = board_clicks = checks = 0
        finished = shot = False
        started = time.monotonic()
        while time.monotonic() - started < PLAY_BUDGET_S:
            await page.wait_for_function(READY, timeout=60_000)
            if await page.locator("#result").is_visible():
                finished = True
                break
            buttons = page.locator("[data-testid=move]:not([disabled])")
            count = await buttons.count()
            if count == 0:
                continue  # the view changed between the check and the count
            legal = await probe(page, "window.__caravel.view.legal_commands.map((c) => c.type)")
            if not shot and moves >= 12 and "rondel" in legal:  # the rondel's costs on show
                await shoot(page, "navegador-playing")
                shot = True
            if moves % 4 == 0:
                await assert_board_shows(page, client, game_id)
                checks += 1
            if moves % 3 == 1 and await click_on_the_board(page, rnd):
                board_clicks += 1
            elif moves % 5 == 2 and count <= 9:
                await page.keyboard.press(str(rnd.randrange(count) + 1))  # digit n: move n
            else:
                await buttons.nth(rnd.randrange(count)).click()
            moves += 1
        assert not await page.locator("#error").inner_text()
        print(f"\n{moves} moves ({board_clicks} on the board), {checks} checks; over: {finished}")
        assert finished or moves >= 30, moves
        assert board_clicks >= 5 and checks >= 5 and shot
        if finished:
            standings = page.locator("[data-testid=result-row]")
            assert await standings.count() == 3
        else:
            await page.wait_for_function(READY, timeout=60_000)
            await assert_board_shows(page, client, game_id)
        await shoot(page, "navegador-last")
        await browser.close()
        assert traffic.errors == []
        traffic.assert_local()
