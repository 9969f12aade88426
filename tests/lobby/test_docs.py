"""The API's documentation works offline: /docs and /redoc load only what the server serves."""

from __future__ import annotations

import re
from pathlib import Path

from redis.asyncio import Redis

from shared.bus import Keys

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
