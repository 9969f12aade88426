"""The web client in a real browser (Debian's Chromium, driven by Playwright) against
`caravel up`: a person creates a table on the home page and plays a whole game against
three bots by clicking (and by keyboard), while a second browser watches it live; both drop
their socket now and then and resume; then the replay steps from the start to the end.
Every request the pages make goes to 127.0.0.1; no page logs an error. Screenshots of each
page at 1,400 and 390 px go to the artefacts folder (see helpers.artifacts)."""

from __future__ import annotations

import random
import re
import statistics
from pathlib import Path

import httpx
from playwright.async_api import Browser, Page, async_playwright
from redis.asyncio import Redis

from shared.bus import Keys
from shared.eventstore import EventStore
from tests.lobby.helpers import running_lobby

from .helpers import READY, WIDE, Traffic, launch, probe, public_view_at, shoot


async def assert_turn_shows_a_clock(player: Page) -> None:
    """When it is the person's turn, the page says so and its clock counts down (m:ss)."""
    await player.wait_for_function(READY, timeout=60_000)
    if await player.locator("[data-testid=your-turn]").count():
        clock = await player.locator("[data-testid=clock]").inner_text()
        assert re.fullmatch(r"[0-9]+:[0-5][0-9]", clock), clock


async def play_on_the_board(player: Page) -> None:
    """Click a highlighted part of the board: it plays the one move it stands for, or picks
    the moves it stands for in the list and focuses the first (then Enter plays it)."""
    await player.wait_for_function(READY, timeout=60_000)
    targets = player.locator("#board .target")
    if await targets.count():
        await targets.first.click()
        await player.keyboard.press("Enter")


async def play_with_the_generic_drawing(player: Page, traffic: Traffic) -> None:
    """The same seat in a second tab drawn by the generic module (what a game without a
    drawing module gets): the view as a tree, the players, and a legal move played from it."""
    context = player.context
    tab = traffic.page(await context.new_page())
    await tab.goto(f"{player.url}?draw=generic")
    await tab.wait_for_function(READY, timeout=60_000)
    assert await tab.locator("[data-testid=view-tree]").count() == 1
    assert await tab.locator("#players article").count() == 4
    await shoot(tab, "table-generic")
    moves = tab.locator("[data-testid=move]:not([disabled])")
    if await moves.count():
        await moves.first.click()
        await tab.wait_for_function("() => window.__caravel.played > 0")
        played = await probe(tab, "window.__caravel.played")
        assert not await tab.locator("#error").inner_text()
        # The first tab's moves are stale until its view catches up with the move.
        await player.wait_for_function(f"() => window.__caravel.view.version >= {played}")
    await tab.close()


async def play_to_the_end(player: Page, watcher: Page, rnd: random.Random, traffic: Traffic) -> int:
    """Click (or press the key of) a random legal move whenever it is the person's turn,
    until the page shows the result; drop both pages' sockets every 15 moves. Returns the
    number of moves made."""
    moves = 0
    while True:
        await player.wait_for_function(READY, timeout=60_000)
        if await player.locator("#result").is_visible():
            return moves
        buttons = player.locator("[data-testid=move]:not([disabled])")
        count = await buttons.count()
        if count == 0:
            continue  # the view changed between the check and the count
        choice = rnd.randrange(count)
        if moves % 5 == 4 and choice < 9:
            await player.keyboard.press(str(choice + 1))  # by keyboard: digit n plays move n
        else:
            await buttons.nth(choice).click()
        moves += 1
        if moves == 2:
            await assert_turn_shows_a_clock(player)
        if moves % 7 == 6:
            await play_on_the_board(player)
        if moves == 10:
            await play_with_the_generic_drawing(player, traffic)
        if moves % 15 == 0:
            await player.evaluate("() => window.__caravel.stream.drop()")
            await watcher.evaluate("() => window.__caravel.stream.drop()")
        if moves == 3:
            await shoot(player, "table-playing")
            await shoot(watcher, "table-watching")


async def join_an_open_table(
    client: httpx.AsyncClient, browser: Browser, traffic: Traffic, base: str
) -> None:
    """A table with a free seat, opened from the home page's list: the page offers the seat;
    joining and starting puts the person at the table, playing."""
    bots = {"1": "greedy"}
    table = (await client.post("/tables", json={"seats": 2, "bots": bots})).json()
    context = await browser.new_context(viewport=WIDE)
    await traffic.watch(context)
    page = traffic.page(await context.new_page())
    await page.goto(f"{base}/")
    await page.wait_for_function(
        "() => !document.querySelector('#tables-finished').textContent.includes('Loading')"
    )
    assert await page.locator("#tables-finished a").count() >= 1  # the game just played
    await shoot(page, "home")
    await page.click(f"#tables-open a[href='/tables/{table['id']}']")
    await page.fill("#join input[name=name]", "Bea")
    await shoot(page, "table-join")
    await page.click("#join button")
    await page.click("#join button:has-text('Start')")
    await page.wait_for_function("() => window.__caravel.view !== null")
    assert "You play seat 1" in await page.locator("#status").inner_text()
    assert await page.locator("#join").is_hidden()
    await context.close()


async def test_a_person_plays_watches_and_replays_a_game_in_the_browser(
    redis_url: str, keys: Keys, redis: Redis, tmp_path: Path
) -> None:
    database = f"sqlite:///{tmp_path / 'lobby.db'}"
    rnd = random.Random(15)
    async with (
        running_lobby(redis_url, keys, database, tmp_path / "data", bot_think_ms="20") as client,
        async_playwright() as playwright,
    ):
        base = str(client.base_url).rstrip("/")
        browser = await launch(playwright)
        traffic = Traffic()
        person = await browser.new_context(viewport=WIDE)
        spectator = await browser.new_context(viewport=WIDE)
        for context in (person, spectator):
            await traffic.watch(context)
        player = traffic.page(await person.new_page())

        # Home: the catalog, a table of the person and three greedy bots (the form's default).
        await player.goto(f"{base}/")
        await player.locator("#catalog .card").first.wait_for()
        await player.locator("#seat-kinds select").nth(3).wait_for()
        await shoot(player, "home-first-visit")
        await player.fill("#create input[name=name]", "Ana")
        await player.click("#create button[type=submit]")
        await player.wait_for_url("**/tables/t-*")
        game_id = player.url.rsplit("/", 1)[1]

        watcher = traffic.page(await spectator.new_page())
        await watcher.goto(f"{base}/tables/{game_id}")
        await player.wait_for_function(READY)
        await watcher.wait_for_function("() => window.__caravel.view !== null")
        assert "watching" in (await watcher.locator("#status").inner_text())

        # A refused move: its reason is shown on the page (sent through the page's own path),
        # and the turn's clock goes on.
        ticking = "() => /^[0-9]+:[0-5][0-9]$/.test(document.querySelector('.clock').textContent)"
        await player.wait_for_function(ticking)
        await player.evaluate("() => window.__caravel.play({type: 'bid', amount: 999})")
        shown = await player.locator("#error").inner_text()
        assert shown and "(" in shown, shown  # the reason, then the rules' code in brackets
        assert await player.evaluate(ticking), "the clock went away after a refused move"
        # Sent on the open socket (an error frame: no console note), or over HTTP while it
        # connects (the browser notes the 4xx answer in the console).
        assert all("status of 4" in e for e in traffic.errors), traffic.errors
        assert len(traffic.errors) <= 1, traffic.errors
        traffic.errors.clear()

        moves = await play_to_the_end(player, watcher, rnd, traffic)
        assert moves > 10
        await watcher.wait_for_function("() => window.__caravel.connection === 'ended'")
        await shoot(player, "table-finished")

        # The result on the page is the scoring service's.
        result = (await client.get(f"/games/{game_id}/result")).json()
        ended = (await client.get(f"/games/{game_id}/view")).json()
        rows = player.locator("[data-testid=result-row]")
        assert await rows.count() == 4
        by_seat = {r["seat"]: r for r in result["results"]}
        for i in range(4):
            row = rows.nth(i)
            seat = int(await row.get_attribute("data-seat") or -1)
            cells = await row.locator("td").all_inner_texts()
            expected = by_seat[seat]
            assert cells == [
                str(expected["place"]),
                ended["players"][seat]["name"],  # the seat's name: "Ana", "Greedy bot 2"
                expected["side"],
                str(expected["total"]),
            ]
        assert "player:Ana" in [r["player"] for r in result["results"]]

        # Live: the watcher saw every public event, once each, in order, dropped sockets and
        # all; the player saw every event of its seat's, the same way.
        log = await EventStore(redis, keys).read(game_id)
        seat = next(r["seat"] for r in result["results"] if r["player"] == "player:Ana")
        for page, who in ((watcher, None), (player, seat)):
            got = await probe(page, "window.__caravel.stream.received")
            assert got == [e.version for e in log if e.visible_to(who)], who
            assert await probe(page, "window.__caravel.stream.reconnects") >= moves // 15
        seen_at = {e["version"]: e["at"] for e in await probe(player, "window.__caravel.events")}
        watched = await probe(watcher, "window.__caravel.events")
        lags = [e["at"] - seen_at[e["version"]] for e in watched if e["version"] in seen_at]
        print(
            f"\nwatcher behind the player: median {statistics.median(lags):.0f} ms, "
            f"max {max(lags):.0f} ms over {len(lags)} events; {moves} moves by the person"
        )
        final = (await client.get(f"/games/{game_id}/view")).json()
        assert await probe(watcher, "window.__caravel.view") == final

        # The replay: its first step is the start, its last the final public view.
        replay = traffic.page(await spectator.new_page())
        await replay.goto(f"{base}/games/{game_id}/replay")
        await replay.wait_for_function("() => window.__caravel.shown === 0")
        steps = await probe(replay, "window.__caravel.steps")
        assert steps == [e.version for e in log if e.visible_to(None)]
        assert await probe(replay, "window.__caravel.view") == public_view_at(log, steps[0])
        await replay.keyboard.press("ArrowRight")
        await replay.wait_for_function("() => window.__caravel.shown === 1")
        await replay.click("#play")
        await replay.wait_for_function("() => window.__caravel.shown >= 4")
        await replay.click("#play")  # pause
        await replay.keyboard.press("End")
        await replay.wait_for_function(f"() => window.__caravel.shown === {len(steps) - 1}")
        assert await probe(replay, "window.__caravel.view") == final
        await shoot(replay, "replay-end")
        await replay.locator("#step").fill(str(len(steps) // 2))
        await replay.wait_for_function(f"() => window.__caravel.shown === {len(steps) // 2}")
        await shoot(replay, "replay-middle")

        await join_an_open_table(client, browser, traffic, base)
        await browser.close()
        assert traffic.errors == []
        traffic.assert_local()


async def test_the_bus_asyncapi_page_shows_the_channels_and_their_messages(
    redis: Redis, redis_url: str, keys: Keys, database_url: str, tmp_path: Path
) -> None:
    """/asyncapi in a browser, offline: a row per channel (the engine reads the commands in its
    group) and a section per message schema, with no error and no request off the machine."""
    async with running_lobby(redis_url, keys, database_url, tmp_path) as client:
        expected = (await client.get("/asyncapi.json")).json()
        async with async_playwright() as playwright:
            browser = await launch(playwright)
            context = await browser.new_context(viewport=WIDE)
            traffic = Traffic()
            await traffic.watch(context)
            page = traffic.page(await context.new_page())
            await page.goto(f"{client.base_url}/asyncapi")
            await page.wait_for_selector("#channels table")
            rows = await page.locator("#channels tbody tr").all_inner_texts()
            assert len(rows) == len(expected["channels"])
            commands = f"{keys.prefix}:{{p}}:commands"
            engine = [r for r in rows if r.split("\t")[:2] == [commands, "engine:commands"]]
            assert engine and "reads\tengine\tCommandEnvelope" in engine[0], rows
            schemas = await page.locator("#schemas article h3").all_inner_texts()
            assert schemas == list(expected["components"]["schemas"])
            await shoot(page, "asyncapi")
            await browser.close()
    assert not traffic.errors, traffic.errors
    traffic.assert_local()
