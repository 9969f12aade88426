"""Finished games in a test's Redis namespace, played through the real engine; their
results exported as a designer exports them."""

from __future__ import annotations

import json
from collections.abc import Sequence
from contextlib import nullcontext
from functools import partial
from pathlib import Path
from typing import Any

import duckdb
from redis.asyncio import Redis
from sqlalchemy import Engine, select

from services.scoring.db import TABLES
from shared.bus import CommandSender, Keys
from shared.contracts import CommandEnvelope
from shared.eventstore import EventStore
from shared.games import age_of_discovery as aod

from ..backbone.helpers import play_locally, running_engine, wait_for
from ..test_cli import caravel


def game_ids(keys: Keys, count: int, stem: str) -> list[str]:
    """``count`` game ids in distinct partitions (as far as there are partitions)."""
    ids: list[str] = []
    seen: set[int] = set()
    i = 0
    while len(ids) < count:
        game_id = f"{stem}-{i}"
        p = keys.partition(game_id)
        if p not in seen or len(seen) == keys.partitions:
            ids.append(game_id)
            seen.add(p)
        i += 1
    return ids


async def play_games(
    redis: Redis,
    keys: Keys,
    games: Sequence[tuple[str, int, int, int | None]],
    seats: dict[str, dict[str, str]] | None = None,
    engine: bool = True,
) -> dict[str, tuple[list[CommandEnvelope], aod.GameState]]:
    """Play (game id, players, seed, command limit) games one after the other through an
    engine (one of this process, or one already running). ``seats`` is the lobby's seats
    hash per game: commands of a ``bot:`` seat are sent as the bot's."""
    sender = CommandSender(redis, keys)
    store = EventStore(redis, keys)
    played = {}
    async with running_engine(redis, keys) if engine else nullcontext():
        for game_id, players, seed, limit in games:
            kinds = (seats or {}).get(game_id, {})
            if kinds:
                await redis.hset(keys.seats(game_id), mapping={k: v for k, v in kinds.items()})
            commands, final = play_locally(game_id, players, seed, limit)
            commands = [
                c.model_copy(update={"actor": "bot"})
                if kinds.get(str(c.seat), "").startswith("bot:")
                else c
                for c in commands
            ]
            # In one transaction: a bot the running lobby plays for a seat answers after
            # them all (and finds the game moved on), never between two of them.
            await sender.send_many(commands)
            await wait_for(partial(_applied, store, game_id, commands[-1].key), timeout_s=60)
            played[game_id] = (commands, final)
    return played


async def _applied(store: EventStore, game_id: str, key: str) -> bool:
    """Whether the command of ``key`` (:attr:`CommandEnvelope.key`) was applied to the game:
    its id is among those the game's log took. Read there, not from its answer, as the bot
    player's commands (a ``bot:`` seat's here) get none."""
    return key in await store.seen(game_id)


def dump(db: Engine) -> dict[str, list[Any]]:
    """Every row of every scoring table, in primary key order."""
    out = {}
    with db.connect() as conn:
        for table in TABLES:
            order = list(table.primary_key.columns)
            out[table.name] = [tuple(row) for row in conn.execute(select(table).order_by(*order))]
    return out


def exported_parquet(
    out: Path, columns: str, *scope: str, env: dict[str, str]
) -> tuple[int, list[tuple[Any, ...]]]:
    """`caravel analytics export --format parquet` of ``scope`` (its options) into ``out``:
    the count of results it reports, and its results as DuckDB reads them, counted by
    ``columns``."""
    exported = caravel(
        "analytics", "export", "--format", "parquet", "-o", str(out), *scope, "--json", env=env
    )
    assert exported.returncode == 0, exported.stderr
    read = duckdb.sql(
        f"SELECT {columns}, count(*) FROM read_parquet('{out}/results/*/*/*.parquet', "
        "hive_partitioning = true) GROUP BY ALL"
    ).fetchall()
    return json.loads(exported.stdout)["results"], read
