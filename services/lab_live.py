"""``caravel lab run --live``: the lab's games played through the running pipeline (the
engine, the bot player and scoring of a ``caravel up``) instead of in process.

Each game is created as the lobby creates a table of bots: the seats hash first (a
``bot:<level>`` per seat, and the experiment's name, which scoring copies into the game's
flat rows, so that ``caravel projections rebuild`` writes them again, and how many games the
run plays, so that a rebuild writes the experiment's row again if SQL lost it), then the engine's
``create_game`` command. The bots play; scoring projects each game as it ends. The run
waits until the experiment's rows hold every game (or none came for ``stall_s``), and its
row says ``complete`` or ``incomplete`` as an in-process run's does.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from redis.asyncio import Redis
from sqlalchemy import Engine, func, select

from services.lab import LabError, LabReport, LabRun, check, mark, start_experiment
from services.runtime import redis_for
from services.scoring import flat
from shared.bus import CommandSender, Keys
from shared.contracts import CommandEnvelope, Seats
from shared.contracts.records import BOT_PREFIX
from shared.games import api
from shared.settings import Settings

NAME = re.compile(r"^[A-Za-z0-9_.:-]+$")  # an experiment's name is part of its games' ids
POLL_S = 0.5
STALL_S = 120.0  # no game recorded for this long: the pipeline is not playing them
CREATE_TIMEOUT_S = 10.0


def game_id(experiment: str, index: int) -> str:
    """A live lab game's id (in-process lab games are ``lab-…``: never the same)."""
    return f"live-{experiment}-{index:07d}"


def create_command(run: LabRun, index: int) -> CommandEnvelope:
    """The ``create_game`` of game ``index``, as the lobby's table start sends it."""
    gid = game_id(run.experiment, index)
    payload = {
        "game": run.game,
        "ruleset": run.ruleset,
        "options": run.options,
        "players": [f"{level} {seat}" for seat, level in enumerate(run.seats)],
        "seed": run.seed + index,
    }
    if run.ruleset is None:
        del payload["ruleset"]
    return CommandEnvelope(
        command_id=f"start-{gid}", game_id=gid, type="create_game", actor="system", payload=payload
    )


def seats_of(run: LabRun) -> Seats:
    """Who plays a live lab game: a bot of each level, under the experiment's name and with
    the run's plan (how many games), from which a rebuild writes the experiment's row again
    (:func:`services.scoring.projection.count_experiment`)."""
    players = {seat: f"{BOT_PREFIX}{level}" for seat, level in enumerate(run.seats)}
    return Seats(players=players, experiment=run.experiment, experiment_games=run.games)


async def _create(redis: Redis, keys: Keys, run: LabRun, index: int) -> None:
    """Seat the bots, then create the game; :class:`LabError` if the engine refuses it or
    does not answer (no pipeline running)."""
    command = create_command(run, index)
    await redis.hset(keys.seats(command.game_id), mapping=seats_of(run).to_mapping())  # type: ignore[arg-type]
    try:
        result = await CommandSender(redis, keys).execute(command, CREATE_TIMEOUT_S)
    except TimeoutError:
        raise LabError(
            f"no engine answered in {CREATE_TIMEOUT_S:.0f} s: is the pipeline (caravel up) running?"
        ) from None
    if result.status != "accepted":
        raise LabError(f"game {command.game_id} refused: {result.code}: {result.reason}")


def recorded(db: Engine, experiment: str) -> int:
    """How many of the experiment's games scoring has projected (their flat rows)."""
    c = flat.RESULTS.c
    query = select(func.count(func.distinct(c.game_id))).where(c.experiment == experiment)
    with db.connect() as conn:
        return int(conn.execute(query).scalar_one())


async def _wait(
    db: Engine, run: LabRun, progress: Callable[[int], None] | None, stall_s: float
) -> int:
    """Poll the flat table until it holds every game of the run, or none came for ``stall_s``."""
    done, last = 0, time.monotonic()
    while done < run.games and time.monotonic() - last < stall_s:
        await asyncio.sleep(POLL_S)
        now = await asyncio.to_thread(recorded, db, run.experiment)
        if now > done:
            await asyncio.to_thread(mark, db, run.experiment, games_recorded=now)
            if progress is not None:
                progress(now - done)
            done, last = now, time.monotonic()
    return done


def check_live(run: LabRun) -> tuple[api.AnyGame, Any]:
    """:func:`services.lab.check`, and a name a game id can carry, a shipped ruleset."""
    game, rules = check(run)
    if not NAME.match(run.experiment):
        raise LabError("a live experiment's name takes letters, digits and _ . : - only")
    if run.ruleset is not None and run.ruleset not in game.rulesets():
        shipped = ", ".join(game.rulesets())
        raise LabError(f"a live run plays a shipped ruleset (the engine reads no file): {shipped}")
    return game, rules


async def run_live(
    run: LabRun,
    db: Engine,
    redis: Redis,
    keys: Keys,
    progress: Callable[[int], None] | None = None,
    stall_s: float = STALL_S,
) -> LabReport:
    """Play a run through the pipeline and wait for scoring to record it; refused as
    :func:`services.lab.run_lab` refuses (nothing written), and for a name a game id
    cannot carry or a ruleset file. Scoring sums the experiment's cells as games end."""
    game, rules = check_live(run)
    start_experiment(db, run, game, rules)
    started, cpu = time.perf_counter(), time.process_time()
    done, status = 0, "incomplete"
    try:
        for index in range(run.games):
            await _create(redis, keys, run, index)
        done = await _wait(db, run, progress, stall_s)
        status = "complete" if done == run.games else "incomplete"
    finally:
        done = await asyncio.to_thread(recorded, db, run.experiment)
        mark(db, run.experiment, games_recorded=done, status=status, finished_at=datetime.now(UTC))
    seconds = time.perf_counter() - started
    return LabReport(run.experiment, done, status, seconds, time.process_time() - cpu, 0)


def play_live(run: LabRun, db: Engine, progress: Callable[[int], None] | None = None) -> LabReport:
    """:func:`run_live` on the configured Redis (``CARAVEL_REDIS_URL``, key prefix and
    partitions): what ``caravel lab run --live`` calls."""
    check_live(run)  # before a Redis is reached (or an embedded one started)
    settings = Settings()
    keys = Keys(settings.key_prefix, settings.partitions)

    async def play() -> LabReport:
        async with redis_for(settings) as pools:
            return await run_live(run, db, pools.client(), keys, progress)

    return asyncio.run(play())
