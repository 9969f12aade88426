"""The page's game stream (``static/js/ws.js``) in Debian's Chromium: a socket the client
dropped itself may have had the game's last events on the way, and a closing socket's
messages are discarded by the browser, so the server's ``game_over`` on it proves nothing.
Found by the browser test in CI: a drop every 15 moves met the game's end, and the
spectator page ended 11 events short."""

from __future__ import annotations

import asyncio
from pathlib import Path

from playwright.async_api import async_playwright
from redis.asyncio import Redis

from shared.bus import Keys
from shared.eventstore import EventStore
from tests.lobby.helpers import running_lobby

from .helpers import WIDE, launch

# Opens a stream on a finished game and drops its first socket at its first event: the
# server sends a finished game's whole log at once and closes with ``game_over``, and the
# browser discards the frames still queued behind the first once the socket is closing (the
# page holds its thread half a second at the first event, for them all to be queued).
DROP_AT_OPEN = """async (gameId) => {
  const { GameStream } = await import('/static/js/ws.js');
  return await new Promise((resolve) => {
    let dropped = false;
    const stream = new GameStream(gameId, {
      onEvent: () => {
        if (dropped) return;
        dropped = true;
        const until = performance.now() + 500;  // the rest of the log and the close arrive
        while (performance.now() < until) {}
        stream.drop();
      },
      onState: (state) => { if (state === 'ended') resolve([stream.received, stream.reconnects]); },
    });
    stream.open();
  });
}"""


async def test_a_socket_dropped_as_the_game_ends_is_followed_again_to_the_last_event(
    redis_url: str, keys: Keys, redis: Redis, tmp_path: Path
) -> None:
    database = f"sqlite:///{tmp_path / 'lobby.db'}"
    async with (
        running_lobby(redis_url, keys, database, tmp_path / "data", bot_think_ms="0") as client,
        async_playwright() as playwright,
    ):
        bots = {str(s): "random" for s in range(2)}
        table = (await client.post("/tables", json={"seats": 2, "bots": bots})).json()["id"]
        for _ in range(600):  # a table of random bots plays to its end in seconds
            if (await client.get(f"/tables/{table}")).json()["status"] == "finished":
                break
            await asyncio.sleep(0.1)
        log = await EventStore(redis, keys).read(table)
        assert log and log[-1].type == "game_ended"
        browser = await launch(playwright)
        page = await (await browser.new_context(viewport=WIDE)).new_page()
        await page.goto(f"{client.base_url}/")
        received = await page.evaluate(DROP_AT_OPEN, table)
        await browser.close()
    versions, reconnects = received
    assert reconnects == 1  # the dropped socket only
    assert versions == [e.version for e in log if e.visible_to(None)]
