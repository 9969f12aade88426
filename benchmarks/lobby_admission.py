"""A socket's move in the lobby, its Redis side alone: the two-trip way (the bucket's and
the seat's script calls in a batch, then the command with the first wait for its answer)
against ``CommandSender.execute_admitted`` (one ``admit`` call with the first wait: one
round trip), alternated, on one Redis, with an echo engine in another process that
answers each command as it comes. Figures: CPU of this process (the lobby's side: the
client, the packing, FastStream's publish) per move, and moves per second.

    python benchmarks/lobby_admission.py [--redis-url redis://127.0.0.1:6379/8]
        [--tables 20] [--seconds 5] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import time
import uuid
from typing import Any

from shared.bus import CommandSender, Keys, connect, delete_namespace
from shared.bus.admission import SCRIPTS
from shared.bus.scripts import Batch
from shared.contracts import CommandEnvelope

HOLDER = "ana"

# Answers every command on the partition streams at once (accepted, version 1).
ENGINE = """
import json, sys
import redis
from shared.bus import Keys
from shared.contracts import CommandEnvelope, CommandResult
url, prefix, partitions = sys.argv[1], sys.argv[2], int(sys.argv[3])
keys = Keys(prefix, partitions)
r = redis.Redis.from_url(url)
at = {keys.commands(p): "0-0" for p in range(partitions)}  # a namespace of its own
while True:
    for stream, entries in r.xread(at, block=1000) or []:
        pipe = r.pipeline(transaction=False)
        for entry_id, fields in entries:
            at[stream.decode()] = entry_id
            c = CommandEnvelope.model_validate_json(fields[b"__data__"])
            if c.type == "stop":
                sys.exit(0)
            done = CommandResult(
                command_id=c.command_id, game_id=c.game_id, status="accepted", version=1
            )
            pipe.lpush(keys.result(c.game_id, c.seat, c.command_id), done.model_dump_json())
        pipe.execute()
"""


def _calls(keys: Keys, game: str, command: CommandEnvelope) -> tuple[Any, Any]:
    take = (SCRIPTS["take"], [f"{keys.prefix}:rate:commands:{game}"], [100000, 100000])
    digest = f"{keys.result(game, 0, command.command_id)}/digest"
    seat = (SCRIPTS["seat"], [keys.holders(game), digest], [0, HOLDER, "d", 60])
    return take, seat


async def _two_trips(sender: CommandSender, keys: Keys, game: str, c: CommandEnvelope) -> None:
    take, seat = _calls(keys, game, c)
    async with Batch(sender.redis) as batch:
        batch.call(*take)
        batch.call(*seat)
        await batch.execute()
    await sender.execute(c, 10)


async def _one_trip(sender: CommandSender, keys: Keys, game: str, c: CommandEnvelope) -> None:
    reply, result, _ = await sender.execute_admitted(*_calls(keys, game, c), c, 10)
    assert result is not None, reply


async def _phase(
    way: Any, sender: CommandSender, keys: Keys, tables: int, seconds: float
) -> dict[str, float]:
    stop = time.monotonic() + seconds
    moves = 0

    async def table(game: str) -> None:
        nonlocal moves
        while time.monotonic() < stop:
            c = CommandEnvelope(
                command_id=uuid.uuid4().hex, game_id=game, seat=0, type="pass", payload={}
            )
            await way(sender, keys, game, c)
            moves += 1

    cpu, wall = time.process_time(), time.monotonic()
    await asyncio.gather(*(table(f"g{i}") for i in range(tables)))
    cpu, wall = time.process_time() - cpu, time.monotonic() - wall
    return {
        "moves": moves,
        "moves_per_second": round(moves / wall, 1),
        "cpu_ms_per_move": round(1000 * cpu / moves, 4),
    }


async def main(url: str, tables: int, seconds: float, rounds: int) -> None:
    keys = Keys(f"cvadm-{uuid.uuid4().hex[:8]}", 8)
    redis = connect(url)
    engine = subprocess.Popen([sys.executable, "-c", ENGINE, url, keys.prefix, "8"])
    sender = CommandSender(redis, keys)
    figures: dict[str, list[float]] = {"two trips": [], "one trip": []}
    try:
        for i in range(tables):
            await redis.hset(keys.holders(f"g{i}"), "0", HOLDER)
        await _phase(_one_trip, sender, keys, tables, 1)  # warm-up: scripts loaded
        await _phase(_two_trips, sender, keys, tables, 1)
        for _ in range(rounds):
            for name, way in (("two trips", _two_trips), ("one trip", _one_trip)):
                out = await _phase(way, sender, keys, tables, seconds)
                print(json.dumps({"way": name, **out}), flush=True)
                figures[name].append(out["cpu_ms_per_move"])
        print(json.dumps({k: sorted(v) for k, v in figures.items()}))
    finally:
        await sender.send(
            CommandEnvelope(command_id="stop", game_id="g0", seat=0, type="stop", payload={})
        )
        engine.wait(10)
        await delete_namespace(redis, keys.prefix)
        await redis.aclose()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/8")
    parser.add_argument("--tables", type=int, default=20)
    parser.add_argument("--seconds", type=float, default=5)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    asyncio.run(main(args.redis_url, args.tables, args.seconds, args.rounds))
