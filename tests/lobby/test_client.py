"""A client generated from the served OpenAPI document (``openapi-python-client``) plays a
whole game over real HTTP, error paths included: the document is usable as a contract, and
this test fails when it stops being so (a generator warning, a model that does not parse
what the server answers, a body it cannot send)."""

from __future__ import annotations

import asyncio
import importlib
import json
import os
import random
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import Any

from redis.asyncio import Redis

from shared.bus import Keys

from .helpers import running_lobby

PACKAGE = "caravel_generated_client"


@contextmanager
def generated_client(spec: dict[str, Any], where: Path) -> Iterator[ModuleType]:
    """The client package ``openapi-python-client`` generates from ``spec``, imported; the
    generator must not warn (a warning means part of the document was left out)."""
    (where / "openapi.json").write_text(json.dumps(spec))
    # The analytics export answers a zip: bytes to the client, as the generator's own
    # override for a binary type it does not know says.
    (where / "config.json").write_text(
        json.dumps({"content_type_overrides": {"application/zip": "application/octet-stream"}})
    )
    generator = os.path.join(os.path.dirname(sys.executable), "openapi-python-client")
    done = subprocess.run(
        [generator, "generate", "--path", "openapi.json", "--meta", "none",
         "--config", "config.json", "--output-path", PACKAGE],
        cwd=where, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Warning" not in done.stdout + done.stderr, done.stdout + done.stderr
    sys.path.insert(0, str(where))
    try:
        yield importlib.import_module(PACKAGE)
    finally:
        sys.path.remove(str(where))
        for name in [m for m in sys.modules if m.split(".")[0] == PACKAGE]:
            del sys.modules[name]


def _module(name: str) -> ModuleType:
    return importlib.import_module(f"{PACKAGE}.{name}")


def _body_of(legal: Any) -> Any:
    """A legal command (as /legal lists it) as the body of a move: the game's command model
    of that ``type`` (the discriminator's mapping names it), without the seat."""
    models = _module("models")
    wire = {k: v for k, v in legal.to_dict().items() if k != "seat"}
    pascal = "".join(part.capitalize() for part in wire["type"].split("_"))
    return getattr(models, f"AgeOfDiscovery{pascal}Command").from_dict(wire)


async def test_a_generated_client_plays_a_whole_game(
    redis: Redis, redis_url: str, keys: Keys, tmp_path: Path
) -> None:
    """Generated from /openapi.json, the client opens a table with a bot, joins it, starts
    it with no body, and plays random legal moves (typed: the legal commands' models turned
    into the body's), each answer carrying the next legal commands, until /legal says the
    game is finished; a forged token, another table's id and a move the rules refuse come
    back as the typed error with their codes."""
    database_url = f"sqlite:///{tmp_path / 'lobby.db'}"  # the contract, not SQL, is tested
    async with running_lobby(redis_url, keys, database_url, tmp_path) as http:
        spec = (await http.get("/openapi.json")).json()
        base_url = str(http.base_url).rstrip("/")
        with generated_client(spec, tmp_path) as client:
            await _play(client, base_url)


async def _play(package: ModuleType, base_url: str) -> None:
    models, tables, games = _module("models"), _module("api.tables"), _module("api.games")
    for name in ("create_table", "join_table", "start_table", "get_table"):
        importlib.import_module(f"{tables.__name__}.{name}")
    for name in ("get_legal", "get_view", "send_command"):
        importlib.import_module(f"{games.__name__}.{name}")
    anyone = package.Client(base_url=base_url, raise_on_unexpected_status=True)
    body = models.CreateTable.from_dict({"seats": 2, "bots": {"1": "random"}, "deadline_s": 3600})
    table = (await tables.create_table.asyncio_detailed(client=anyone, body=body)).parsed
    assert isinstance(table, models.TableOut) and table.status == models.TableOutStatus.OPEN
    joined = await tables.join_table.asyncio(table.id, client=anyone, body=models.JoinTable("Ana"))
    assert isinstance(joined, models.JoinOut) and joined.seat == 0
    seat = package.AuthenticatedClient(base_url=base_url, token=joined.token)
    started = await tables.start_table.asyncio(table.id, client=seat)  # no body: its default
    assert isinstance(started, models.TableOut), started
    assert started.status == models.TableOutStatus.RUNNING

    forged = package.AuthenticatedClient(base_url=base_url, token=joined.token[:-4] + "AAAA")
    refused = await games.get_legal.asyncio_detailed(table.id, client=forged)
    assert refused.status_code == 401 and isinstance(refused.parsed, models.ErrorOut)
    unknown = await games.get_legal.asyncio_detailed("g-none", client=seat)
    assert unknown.status_code == 403 and unknown.parsed.code == "wrong_table"

    nowhere = models.AgeOfDiscoveryPlaceCommand.from_dict(
        {"type": "place", "unit": "colonist", "box": "atlantis"}
    )
    rejected = await games.send_command.asyncio_detailed(table.id, client=seat, body=nowhere)
    assert rejected.status_code == 409 and isinstance(rejected.parsed, models.ErrorOut)
    assert rejected.parsed.code and rejected.parsed.message  # the rules' code and reason

    rng, moves = random.Random(5), 0
    legal = await games.get_legal.asyncio(table.id, client=seat, after_version=1)
    while not legal.finished:
        assert isinstance(legal, models.LegalOut), legal
        if not legal.legal_commands:  # the bot's turn: ask again in a moment
            await asyncio.sleep(0.02)
            newer = await games.get_legal.asyncio(
                table.id, client=seat, after_version=legal.version
            )
            assert isinstance(newer, models.LegalOut) and newer.version >= legal.version
            legal = newer
            continue
        body = _body_of(rng.choice(legal.legal_commands))
        answer = await games.send_command.asyncio(table.id, client=seat, body=body, legal=True)
        assert isinstance(answer, models.CommandOut), answer
        assert answer.status == models.CommandOutStatus.ACCEPTED and answer.version > legal.version
        assert isinstance(answer.legal, models.LegalOut) and answer.legal.version >= answer.version
        legal, moves = answer.legal, moves + 1
    assert legal.legal_commands == [] and moves > 20
    version = legal.version
    view = await games.get_view.asyncio(table.id, client=seat, after_version=version)
    assert isinstance(view, models.AgeOfDiscoverySeatView) and view.phase.value == "over"
    final = await tables.get_table.asyncio(table.id, client=anyone)
    assert final.status == models.TableOutStatus.FINISHED
