"""`caravel simulate` end to end, as a user runs it."""

from __future__ import annotations

import asyncio
import gzip
import json
import os
import subprocess
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from redis.asyncio import Redis
from sqlalchemy import Engine

from services.engine.janitor import Janitor
from shared.bus import Keys
from shared.eventstore import Archive, EventStore, GameCodec
from shared.eventstore.logfile import dump_lines, load_lines, read_file
from tests.backbone.helpers import play_to_the_end, running_engine, settings_for

pytestmark = pytest.mark.every_database  # SQL semantics: SQLite and PostgreSQL


def caravel(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "services.cli", *args],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )


@pytest.mark.parametrize("players", [2, 3, 4, 5])
def test_simulate_json_for_every_player_count(players: int) -> None:
    result = caravel(
        "simulate", "--players", str(players), "--games", "3", "--seed", "11", "--json"
    )
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout.strip().splitlines()[-1])
    assert summary["games"] == 3
    assert summary["games_per_second"] > 0
    assert summary["mean_decisions_per_game"] > 8 * players  # at least five units a turn each
    assert len(summary["scores"]) == 3
    assert all(len(totals) == players for totals in summary["scores"])
    assert sum(summary["win_rate"]) == pytest.approx(1.0, abs=1e-3)


@pytest.mark.parametrize(
    "option",
    [
        "navy_vp_per_ship=3",
        "factory_income=30",
        "tile_set=extended",
        "university=one_forward",
        "starting_order=auction",
    ],
)
def test_simulate_with_each_edition_option(option: str) -> None:
    result = caravel("simulate", "--players", "3", "--games", "2", "--option", option, "--json")
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout.strip().splitlines()[-1])
    key, value = option.split("=")
    assert str(summary["options"][key]) == value


def test_simulate_is_reproducible_by_seed() -> None:
    first = caravel("simulate", "--games", "2", "--seed", "5", "--json")
    second = caravel("simulate", "--games", "2", "--seed", "5", "--json")
    scores = [json.loads(r.stdout.strip().splitlines()[-1])["scores"] for r in (first, second)]
    assert scores[0] == scores[1]


def test_simulate_table_output_and_bad_input() -> None:
    table = caravel("simulate", "--players", "2", "--games", "2")
    assert table.returncode == 0
    assert "win rate" in table.stdout and "games/s" in table.stdout
    bad_option = caravel("simulate", "--option", "speed=fast")
    assert bad_option.returncode != 0 and "unknown option" in bad_option.stderr
    bad_players = caravel("simulate", "--players", "6")
    assert bad_players.returncode != 0 and "2 to 5 players" in bad_players.stderr


def test_simulate_names_its_game_and_refuses_unknown_ones() -> None:
    args = ("--games", "2", "--seed", "5", "--json")
    named = caravel("simulate", "--game", "age_of_discovery", *args)
    assert named.returncode == 0, named.stderr
    default = caravel("simulate", *args)
    summaries = [json.loads(r.stdout.strip().splitlines()[-1]) for r in (named, default)]
    assert summaries[0]["game"] == summaries[1]["game"] == "age_of_discovery"
    assert summaries[0]["scores"] == summaries[1]["scores"]
    unknown = caravel("simulate", "--game", "chess")
    assert unknown.returncode != 0 and "age_of_discovery" in unknown.stderr


def test_games_lists_every_registered_game() -> None:
    result = caravel("games", "--json")
    assert result.returncode == 0, result.stderr
    games = {g["name"]: g for g in json.loads(result.stdout)}
    aod = games["age_of_discovery"]
    assert (aod["min_players"], aod["max_players"]) == (2, 5)
    assert "standard" in aod["rulesets"]
    assert aod["options"]["properties"]["tile_set"]["enum"] == ["standard", "extended"]
    table = caravel("games")
    assert table.returncode == 0 and "tile_set: standard|extended" in table.stdout


async def test_games_export_delete_import_round_trip(
    redis: Redis, keys: Keys, redis_url: str, database_url: str, database: Engine, tmp_path: Path
) -> None:
    """A finished game exported, deleted and imported again: the same events, versions and
    final hash; importing it twice is refused; once archived, it exports from the archive."""
    run = _games_command(keys, redis_url, database_url, tmp_path)

    game_id = "g-moved"
    async with running_engine(redis, keys):
        final_hash = await play_to_the_end(redis, keys, game_id, players=2, seed=21)
    store = EventStore(redis, keys, archive=Archive(database))
    events = await store.read(game_id)

    exported = await run("export", game_id, "-o", str(tmp_path / "game.jsonl.gz"))
    assert exported.returncode == 0, exported.stderr
    assert read_file(tmp_path / "game.jsonl.gz") == events

    p = keys.partition(game_id)
    await _forget(redis, keys, game_id)
    assert await store.read(game_id) == []
    missing = await run("export", game_id)
    assert missing.returncode == 1 and f"no game {game_id}" in missing.stderr

    imported = await run("import", str(tmp_path / "game.jsonl.gz"))
    assert imported.returncode == 0, imported.stderr
    assert await store.read(game_id) == events
    assert await store.final_hash(game_id) == final_hash
    assert GameCodec().state_hash(GameCodec().replay(events)) == final_hash
    twice = await run("import", str(tmp_path / "game.jsonl.gz"))
    assert twice.returncode == 1 and "exists already" in twice.stderr

    settings = settings_for(keys, archive_after_s=0)
    janitor = Janitor(redis, keys, settings, Archive(database), keys.all_partitions)
    await janitor.tend(p)
    assert not await redis.exists(keys.log(game_id))
    archived = await run("export", game_id)
    assert archived.returncode == 0 and "from the archive" in archived.stderr
    assert load_lines(archived.stdout.encode()) == events


def _games_command(
    keys: Keys, redis_url: str, database_url: str, tmp_path: Path
) -> Callable[..., Awaitable[subprocess.CompletedProcess[str]]]:
    """``caravel games ...`` on this test's Redis namespace and database."""
    env = {
        **os.environ,
        "CARAVEL_REDIS_URL": redis_url,
        "CARAVEL_KEY_PREFIX": keys.prefix,
        "CARAVEL_PARTITIONS": str(keys.partitions),
        "CARAVEL_DATABASE_URL": database_url,
        "CARAVEL_DATA_DIR": str(tmp_path / "data"),
    }

    async def run(*args: str) -> subprocess.CompletedProcess[str]:
        return await asyncio.to_thread(caravel, "games", *args, env=env)

    return run


def _edited(events: list[Any], version: int, change: Any) -> list[Any]:
    """The log with event ``version``'s data changed by ``change`` (a dict -> dict)."""
    out = list(events)
    event = out[version - 1]
    out[version - 1] = event.model_copy(update={"data": change(dict(event.data))})
    return out


def _first_int(data: dict[str, Any]) -> str | None:
    return next((k for k, v in data.items() if type(v) is int and k != "seat"), None)


async def test_import_refuses_edited_logs_and_unreadable_files_in_one_line(
    redis: Redis, keys: Keys, redis_url: str, database_url: str, tmp_path: Path
) -> None:
    """Issue 25: an edited amount, or a forged ``game_ended`` total of 999, was imported
    without complaint (the public log then disagreed with scoring); a truncated gzip printed
    ``Aborted.`` and a file that is not JSON a traceback (exit 2). Now every command's
    events are decided again (the first version that differs is named), the export's final
    hash must be the replay's, and an unreadable file is one line on stderr and exit 1."""
    run = _games_command(keys, redis_url, database_url, tmp_path)

    game_id = "g-forged"
    async with running_engine(redis, keys):
        final_hash = await play_to_the_end(redis, keys, game_id, players=2, seed=5)
    exported = await run("export", game_id, "-o", str(tmp_path / "game.jsonl"))
    assert exported.returncode == 0, exported.stderr
    header_line, *lines = (tmp_path / "game.jsonl").read_bytes().splitlines()
    header = json.loads(header_line)
    assert header["final_hash"] == final_hash and header["caravel_version"] == "0.1.0"
    assert header["events"] == len(lines)
    events = read_file(tmp_path / "game.jsonl")
    await _forget(redis, keys, game_id)

    amount = next(e for e in events[1:] if _first_int(e.data) and e.type != "game_ended")
    key = _first_int(amount.data)
    ended = events[-1]
    total = _first_int(ended.data) or next(k for k, v in ended.data.items() if isinstance(v, list))
    forged = {
        "amount": _edited(events, amount.version, lambda d: {**d, key: d[key] + 1}),
        "total": _edited(events, ended.version, lambda d: {**d, total: 999}),
    }
    for name, log in forged.items():
        path = tmp_path / f"{name}.jsonl"
        path.write_bytes(header_line + b"\n" + dump_lines(log))
        refused = await run("import", str(path))
        assert refused.returncode == 1, (name, refused.stderr)
        version = amount.version if name == "amount" else ended.version
        assert f"version {version} " in refused.stderr, refused.stderr
        assert len(refused.stderr.strip().splitlines()) == 1
    other_hash = json.dumps({**header, "final_hash": "0" * 16}).encode()
    (tmp_path / "hash.jsonl").write_bytes(other_hash + b"\n" + b"\n".join(lines) + b"\n")
    refused = await run("import", str(tmp_path / "hash.jsonl"))
    assert refused.returncode == 1 and "the export says 0000000000000000" in refused.stderr

    data = gzip.compress((tmp_path / "game.jsonl").read_bytes())
    unreadable = {"cut.jsonl.gz": data[: len(data) // 2], "text.jsonl": b"not json at all\n"}
    for name, content in unreadable.items():
        (tmp_path / name).write_bytes(content)
        refused = await run("import", str(tmp_path / name))
        assert refused.returncode == 1, refused.stderr
        assert len(refused.stderr.strip().splitlines()) == 1, refused.stderr
        assert refused.stderr.startswith("cannot read")
    assert await EventStore(redis, keys).read(game_id) == []  # nothing imported so far

    honest = await run("import", str(tmp_path / "game.jsonl"))
    assert honest.returncode == 0, honest.stderr
    assert await EventStore(redis, keys).final_hash(game_id) == final_hash


async def _forget(redis: Redis, keys: Keys, game_id: str) -> None:
    """Delete a game from Redis, as if it had never been there."""
    p = keys.partition(game_id)
    await redis.delete(keys.log(game_id), keys.meta(game_id), keys.seen(game_id))
    await redis.delete(keys.snapshot(game_id))
    await redis.srem(keys.games(p), game_id)
    await redis.srem(keys.finished(p), game_id)
