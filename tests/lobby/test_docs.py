"""The API's documentation: /docs and /redoc work offline (they load only what the server
serves), and the OpenAPI document says what the server accepts."""

from __future__ import annotations

import re
from pathlib import Path

from redis.asyncio import Redis

from shared.bus import Keys
from shared.games import api

from .helpers import running_lobby

# Every address a page loads: src and href attributes, Swagger UI's url and ReDoc's spec-url.
ADDRESS = re.compile(r"""(?:src|href|spec-url)=["']([^"']+)["']|\burl: ?'([^']+)'""")


async def test_the_docs_pages_load_only_local_addresses_that_answer(
    redis: Redis, redis_url: str, keys: Keys, database_url: str, tmp_path: Path
) -> None:
    async with running_lobby(redis_url, keys, database_url, tmp_path) as client:
        for page in ("/docs", "/redoc"):
            html = await client.get(page)
            assert html.status_code == 200 and "text/html" in html.headers["content-type"]
            addresses = [a or b for a, b in ADDRESS.findall(html.text)]
            assert any(a.endswith(".js") for a in addresses), addresses  # the page's script
            assert "/openapi.json" in addresses
            assert not re.search(r"https?://", html.text), f"{page} names another host"
            for address in addresses:
                assert address.startswith("/"), address
                assert (await client.get(address)).status_code == 200, address


async def test_the_openapi_document_and_405s_say_what_the_server_accepts(
    redis: Redis, redis_url: str, keys: Keys, database_url: str, tmp_path: Path
) -> None:
    """Seat counts, bot seats and levels in the schema are those some game takes: the edge of
    each range is accepted, one past it refused. A 405 names every method of the path."""
    entries = api.catalog()
    low, high = min(e.min_players for e in entries), max(e.max_players for e in entries)
    levels = sorted({level for e in entries for level in e.bot_levels})
    async with running_lobby(redis_url, keys, database_url, tmp_path) as client:
        schemas = (await client.get("/openapi.json")).json()["components"]["schemas"]
        table = schemas["CreateTable"]["properties"]
        assert (table["seats"]["minimum"], table["seats"]["maximum"]) == (low, high)
        assert table["bots"]["propertyNames"]["enum"] == [str(s) for s in range(high)]
        assert table["bots"]["additionalProperties"]["enum"] == levels
        players = schemas["QueueIn"]["properties"]["players"]
        assert (players["minimum"], players["maximum"]) == (low, high)
        assert schemas["JoinTable"]["properties"]["seat"]["maximum"] == high - 1

        widest = {"seats": high, "bots": {str(s): levels[0] for s in range(1, high)}}
        assert (await client.post("/tables", json=widest)).status_code == 201
        bot_off_the_table = {"seats": low, "bots": {str(low): levels[0]}}
        for refused in ({"seats": low - 1}, {"seats": high + 1}, bot_off_the_table):
            assert (await client.post("/tables", json=refused)).status_code == 422, refused

        for method, path, allowed in (
            ("TRACE", "/tables", "GET, POST"),
            ("DELETE", "/tables/t-1/join", "POST"),
            ("PUT", "/games", "GET"),
        ):
            answer = await client.request(method, path)
            assert answer.status_code == 405 and answer.json()["code"] == "method_not_allowed"
            assert answer.headers["allow"] == allowed
