"""The lobby knows games only through the registry: the catalog, the OpenAPI document, and the
checks of a table's (or a queued player's) game, options, seats and bots, over real HTTP."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema_rs
from redis.asyncio import Redis

from shared.bus import Keys
from shared.eventstore import EventStore
from shared.games import api

from .helpers import bearer, running_lobby, wait_for_view


async def test_the_catalog_and_the_openapi_document_show_every_game(
    redis: Redis, redis_url: str, keys: Keys, database_url: str, tmp_path: Path
) -> None:
    """GET /games lists each registered game with its players, rulesets, options, bot levels
    and commands; OpenAPI documents each game's commands (as the body of a move) and
    options (of a table)."""
    async with running_lobby(redis_url, keys, database_url, tmp_path) as client:
        games = (await client.get("/games")).json()
        spec = (await client.get("/openapi.json")).json()
    assert [g["name"] for g in games] == api.names()
    aod = next(g for g in games if g["name"] == api.DEFAULT_GAME)
    game = api.get(api.DEFAULT_GAME)
    assert (aod["min_players"], aod["max_players"]) == (game.min_players, game.max_players)
    assert (aod["min_players"], aod["max_players"]) == (2, 5)
    assert aod["default_ruleset"] == "standard" and "standard" in aod["rulesets"]
    assert aod["options"]["properties"]["tile_set"]["enum"] == ["standard", "extended"]
    assert aod["bot_levels"] == api.bot_levels(game) == ["random", "greedy", "mcts"]
    assert set(aod["commands"]) == set(game.command_types())
    assert aod["commands"]["place"]["properties"]["type"] == {"const": "place"}

    # A move's body: one of the games' unions of commands, each discriminated on ``type``.
    components = spec["components"]["schemas"]
    body = spec["paths"]["/games/{game_id}/commands"]["post"]["requestBody"]
    assert body["content"]["application/json"]["schema"] == {"$ref": _ref("Command")}
    per_game = [_pascal(name) for name in api.names()]
    assert components["Command"]["oneOf"] == [{"$ref": _ref(f"{g}Command")} for g in per_game]
    for game_name, game_class in zip(api.names(), per_game, strict=True):
        union = components[f"{game_class}Command"]
        kinds = api.get(game_name).command_types()
        assert union["discriminator"]["propertyName"] == "type"
        assert set(union["discriminator"]["mapping"]) == set(kinds)
        for kind, ref in union["discriminator"]["mapping"].items():
            shape = components[ref.rsplit("/", 1)[-1]]
            assert shape["properties"]["type"] == {"type": "string", "const": kind}
            assert "seat" not in shape["properties"] and "command_id" in shape["properties"]
    place = components[f"{_pascal(api.DEFAULT_GAME)}PlaceCommand"]
    assert {"type", "unit", "box", "command_id"} <= set(place["properties"])
    assert set(place["required"]) == {"type", "unit", "box"}
    legal = components[f"{_pascal(api.DEFAULT_GAME)}PlaceLegalCommand"]
    assert set(legal["required"]) == set(legal["properties"]) and "seat" in legal["required"]
    assert components["LegalOut"]["properties"]["legal_commands"]["items"] == {
        "$ref": _ref("LegalCommand")
    }

    options = _resolve(spec, spec["paths"]["/tables"]["post"]["requestBody"])["properties"]
    per_game = {s["title"]: s for s in options["options"]["anyOf"]}
    assert set(per_game) == set(api.names())
    assert per_game[api.DEFAULT_GAME]["properties"] == aod["options"]["properties"]
    assert options["game"]["default"] == api.DEFAULT_GAME


async def test_the_openapi_document_describes_the_views_the_api_answers(
    redis: Redis, redis_url: str, keys: Keys, database_url: str, tmp_path: Path
) -> None:
    """GET /games/{id}/view's 200 schema is one of the games' view schemas, each a component
    whose references all resolve in the document (no ``$defs`` left), and the views the API
    answers, a seat's and a spectator's, conform to it; other objects do not."""
    async with running_lobby(redis_url, keys, database_url, tmp_path) as client:
        spec = (await client.get("/openapi.json")).json()
        body = {"seats": 3, "bots": {"1": "random", "2": "random"}, "deadline_s": 3600}
        table = (await client.post("/tables", json=body)).json()
        joined = (await client.post(f"/tables/{table['id']}/join", json={"name": "v"})).json()
        started = await client.post(f"/tables/{table['id']}/start", headers=bearer(joined["token"]))
        assert started.status_code == 200
        seat_view = await wait_for_view(client, table["id"], joined["token"], 1)
        spectator = (await client.get(f"/games/{table['id']}/view")).json()
    answer = spec["paths"]["/games/{game_id}/view"]["get"]["responses"]["200"]
    schema = answer["content"]["application/json"]["schema"]
    assert schema == {"$ref": _ref("View")}
    assert len(spec["components"]["schemas"]["View"]["oneOf"]) == len(api.names())
    assert "$defs" not in json.dumps(spec)
    check = jsonschema_rs.Draft202012Validator({**schema, "components": spec["components"]})
    assert seat_view["seat"] == 0 and "legal_commands" in seat_view
    assert spectator["seat"] is None and "legal_commands" not in spectator
    for view in (seat_view, spectator):
        assert check.is_valid(view), [e.message for e in check.iter_errors(view)][:3]
        assert not check.is_valid({**view, "unexpected": 1})
    assert not check.is_valid({"type": "object"})


def _ref(name: str) -> str:
    return f"#/components/schemas/{name}"


def _pascal(game: str) -> str:
    return "".join(part.capitalize() for part in game.split("_"))


def _resolve(spec: dict[str, Any], body: dict[str, Any]) -> dict[str, Any]:
    """The schema of a request body, its $ref followed."""
    ref: str = body["content"]["application/json"]["schema"]["$ref"]
    schema: dict[str, Any] = spec["components"]["schemas"][ref.rsplit("/", 1)[-1]]
    return schema


async def test_tables_and_the_queue_take_a_game_and_check_it_through_the_registry(
    redis: Redis, redis_url: str, keys: Keys, database_url: str, tmp_path: Path
) -> None:
    """An unknown game gets 422 listing the known ones; seats, bot levels and options are
    checked against the game; a table names its game, and so does its log's first event."""
    async with running_lobby(redis_url, keys, database_url, tmp_path) as client:

        async def refused(path: str, body: dict[str, Any], code: str) -> dict[str, Any]:
            response = await client.post(path, json=body)
            assert response.status_code == 422, response.json()
            error: dict[str, Any] = response.json()
            assert error["code"] == code and error["message"], error
            return error

        for path, body in (
            ("/tables", {"game": "chess", "seats": 2}),
            ("/queue", {"game": "chess", "name": "a", "players": 2}),
        ):
            error = await refused(path, body, "unsupported_game")
            assert error["details"]["known"] == api.names()
            assert all(name in error["message"] for name in api.names())
        for seats in (1, 6):  # The Age of Discovery is for 2 to 5
            error = await refused("/tables", {"seats": seats}, "bad_player_count")
            assert error["details"] == {"min": 2, "max": 5}
        await refused("/queue", {"name": "a", "players": 6}, "bad_player_count")
        error = await refused("/tables", {"seats": 2, "bots": {"1": "genius"}}, "bad_bot")
        assert error["details"]["known"] == api.bot_levels(api.get(api.DEFAULT_GAME))
        await refused("/tables", {"seats": 2, "ruleset": "nope"}, "bad_options")
        await refused("/queue", {"name": "a", "players": 2, "options": {"x": 1}}, "bad_options")
        await refused("/tables", {"seats": 2, "options": {"navy_vp_per_ship": 5}}, "bad_options")

        body = {"game": api.DEFAULT_GAME, "seats": 2, "options": {"navy_vp_per_ship": 3}}
        table = (await client.post("/tables", json=body)).json()
        assert (table["game"], table["ruleset"]) == (api.DEFAULT_GAME, "standard")
        defaults = api.get(api.DEFAULT_GAME).options_model("standard")().model_dump()
        assert table["options"] == {**defaults, "navy_vp_per_ship": 3}
        seat = (await client.post(f"/tables/{table['id']}/join", json={"name": "A"})).json()
        start = f"/tables/{table['id']}/start"
        bad_fill = await client.post(
            start, json={"fill_with_bots": "genius"}, headers=bearer(seat["token"])
        )
        assert bad_fill.status_code == 422 and bad_fill.json()["code"] == "bad_bot"
        assert (await client.get(f"/tables/{table['id']}")).json()["status"] == "open"
        started = await client.post(
            start, json={"fill_with_bots": "random"}, headers=bearer(seat["token"])
        )
        assert started.status_code == 200, started.json()
    first = (await EventStore(redis, keys).read(table["id"]))[0]
    assert first.type == "game_created"
    assert (first.data["game"], first.data["ruleset"]) == (api.DEFAULT_GAME, "standard")
    assert first.data["options"] == table["options"]
    assert first.data["players"] == ["A", "Random bot 2"]
