"""The API's documentation: /docs and /redoc work offline (they load only what the server
serves), and the OpenAPI document says what the server accepts."""

from __future__ import annotations

import re
from pathlib import Path

import yaml
from redis.asyncio import Redis

from services.asyncapi import document
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


async def test_the_bus_asyncapi_document_and_its_page_are_served_offline(
    redis: Redis, redis_url: str, keys: Keys, database_url: str, tmp_path: Path
) -> None:
    """/asyncapi.json and /asyncapi.yaml are the bus's document for this process's key prefix
    and partitions; /asyncapi, its page, loads only local addresses; none of them is part of
    the HTTP API's OpenAPI document."""
    expected = document(keys)
    async with running_lobby(redis_url, keys, database_url, tmp_path) as client:
        as_json = await client.get("/asyncapi.json")
        assert as_json.status_code == 200 and as_json.json() == expected
        as_yaml = await client.get("/asyncapi.yaml")
        assert as_yaml.status_code == 200 and "yaml" in as_yaml.headers["content-type"]
        assert yaml.safe_load(as_yaml.text) == expected
        commands = f"{keys.prefix}:{{p}}:commands"
        assert expected["channels"]["engine:commands"]["address"] == commands
        html = await client.get("/asyncapi")
        assert html.status_code == 200 and "text/html" in html.headers["content-type"]
        assert not re.search(r"https?://", html.text), "/asyncapi names another host"
        addresses = [a or b for a, b in ADDRESS.findall(html.text)]
        assert "/static/js/asyncapi.js" in addresses
        for address in addresses:
            assert address.startswith("/"), address
            assert (await client.get(address)).status_code == 200, address
        script = (await client.get("/static/js/asyncapi.js")).text
        assert '"/asyncapi.json"' in script and not re.search(r"https?://", script)
        paths = (await client.get("/openapi.json")).json()["paths"]
        assert not [p for p in paths if p.startswith("/asyncapi")], list(paths)


async def test_the_openapi_document_and_405s_say_what_the_server_accepts(
    redis: Redis, redis_url: str, keys: Keys, database_url: str, tmp_path: Path
) -> None:
    """Seat counts, bot seats and levels in the schema are those some game takes: the edge of
    each range is accepted, one past it refused. A 405 names every method of the path."""
    entries = api.catalog()
    low, high = min(e.min_players for e in entries), max(e.max_players for e in entries)
    levels = sorted({level for e in entries for level in e.bot_levels})
    async with running_lobby(redis_url, keys, database_url, tmp_path) as client:
        spec = (await client.get("/openapi.json")).json()
        schemas = spec["components"]["schemas"]
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


async def test_the_openapi_document_types_what_a_generated_client_needs(
    redis: Redis, redis_url: str, keys: Keys, tmp_path: Path
) -> None:
    """Readable operation ids (the routes' names), the seat token as a bearer scheme (a
    spectator's view needs none), enums for statuses, seat kinds and bot levels, and the
    optional body of a start as its model (no ``anyOf`` with null)."""
    database_url = f"sqlite:///{tmp_path / 'lobby.db'}"
    async with running_lobby(redis_url, keys, database_url, tmp_path) as client:
        spec = (await client.get("/openapi.json")).json()
    operations = {
        (method, path): operation
        for path, methods in spec["paths"].items()
        for method, operation in methods.items()
    }
    ids = {key: operation["operationId"] for key, operation in operations.items()}
    assert ids[("get", "/games/{game_id}/view")] == "get_view"
    assert ids[("post", "/tables/{table_id}/start")] == "start_table"
    assert ids[("post", "/games/{game_id}/commands")] == "send_command"
    assert all(re.fullmatch(r"[a-z]+(_[a-z]+)*", i) for i in ids.values()), ids
    assert len(set(ids.values())) == len(ids)

    assert spec["components"]["securitySchemes"]["seatToken"] == {
        "type": "http",
        "scheme": "bearer",
        "description": spec["components"]["securitySchemes"]["seatToken"]["description"],
    }
    for key in (("get", "/games/{game_id}/legal"), ("post", "/tables/{table_id}/start")):
        assert operations[key]["security"] == [{"seatToken": []}]
        assert "authorization" not in [p["name"] for p in operations[key]["parameters"]]
    assert operations[("get", "/games/{game_id}/view")]["security"] == [{"seatToken": []}, {}]

    schemas = spec["components"]["schemas"]
    levels = sorted({level for e in api.catalog() for level in e.bot_levels})
    assert schemas["TableOut"]["properties"]["status"]["enum"] == ["open", "running", "finished"]
    assert schemas["TicketOut"]["properties"]["status"]["enum"] == ["waiting", "matched"]
    assert schemas["SeatOut"]["properties"]["kind"]["enum"] == ["human", "bot"]
    nullable_level = [{"type": "string", "enum": levels}, {"type": "null"}]
    assert schemas["SeatOut"]["properties"]["bot_level"]["anyOf"] == nullable_level
    assert schemas["StartTable"]["properties"]["fill_with_bots"]["anyOf"] == nullable_level
    start = operations[("post", "/tables/{table_id}/start")]["requestBody"]
    assert start["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/StartTable"
    }
    assert not start.get("required", False)
    assert "202" in operations[("post", "/tables/{table_id}/start")]["responses"]
