"""The engine's own work per command, without the bus around it: ``Engine.handle`` on
batches of commands of many games, against a real Redis.

``--games`` random games (The Age of Discovery, four seats) are played ahead by a seeded
player and kept in a file (``--script``, made on the first run), so every run handles the
same commands; round ``r`` sends each game's ``r``-th command, handed to ``Engine.handle``
``--batch`` at a time (the engine reads about 30 per batch at 4,000 commands/s). It prints
the CPU time (``time.process_time``) per command spent in ``handle``. On a machine too busy
for CPU time to compare, count instructions instead, which do not move with the load:
``--rounds`` handled against ``--handle 1`` (the set-up alone), under cachegrind::

    valgrind --tool=cachegrind --cache-sim=no --cachegrind-out-file=/dev/null \\
        python benchmarks/engine_handle.py --handle 1      # I refs: a
    valgrind ... python benchmarks/engine_handle.py         # I refs: b

and (b - a) over the commands the second handled beyond the first's is instructions per
command (``PYTHONHASHSEED=0`` for both).
"""

from __future__ import annotations

import argparse
import asyncio
import pickle
import random
import time
import uuid
from pathlib import Path

from services.engine import Engine
from services.runtime import tune_collector
from shared.bus import BODY, Delivery, Keys, connect, delete_namespace
from shared.contracts import CommandEnvelope
from shared.games import api
from shared.settings import Settings


def script(games: int, rounds: int) -> list[list[bytes]]:
    """Each game's commands, as the engine reads them: create_game, then random moves."""
    game = api.get()
    rules = game.rules(game.default_ruleset)
    out = []
    for i in range(games):
        game_id, seed = f"h-{i}", i + 1
        state, _ = game.new_game(rules, 4, seed)
        chooser = random.Random(seed)
        payload = {"game": game.name, "players": 4, "seed": seed}
        create = CommandEnvelope(
            game_id=game_id, type="create_game", actor="system", payload=payload
        )
        commands = [create.model_dump_json().encode()]
        for _ in range(rounds):
            decisions = game.pending(state)
            if not decisions:
                break
            seat = chooser.choice(decisions).seat
            command = chooser.choice(game.legal_commands(state, seat))
            game.decide_into(state, command)
            data = command.to_dict()
            kind = data.pop("type")
            data.pop("seat")
            envelope = CommandEnvelope(
                game_id=game_id, seat=seat, type=kind, payload=data, actor="bot"
            )
            commands.append(envelope.model_dump_json().encode())
        out.append(commands)
    return out


async def run(url: str, games: list[list[bytes]], batch: int, handle: int) -> tuple[int, float]:
    """Commands handled and the CPU seconds ``handle`` took, in a namespace of its own."""
    redis = connect(url, max_connections=64)
    keys = Keys(f"cvhandle-{uuid.uuid4().hex[:8]}", 64)
    engine = Engine(redis, Settings(key_prefix=keys.prefix, partitions=64), keys)
    handled, cpu = 0, 0.0
    try:
        await engine.start()
        engine.held = set(keys.all_partitions())
        tune_collector()
        for r in range(min(max(len(g) for g in games), handle)):
            sent = [(g[r], keys.commands(keys.partition(f"h-{i}"))) for i, g in enumerate(games)]
            sent = [(body, stream) for body, stream in sent if body is not None]
            async with redis.pipeline(transaction=False) as pipe:
                for body, stream in sent:
                    pipe.xadd(stream, {BODY: body})
                ids = await pipe.execute()
            deliveries = [
                Delivery(stream, i.decode(), {BODY: body})
                for (body, stream), i in zip(sent, ids, strict=True)
            ]
            for k in range(0, len(deliveries), batch):
                started = time.process_time()
                await engine.handle(deliveries[k : k + batch])
                cpu += time.process_time() - started
                handled += len(deliveries[k : k + batch])
    finally:
        await delete_namespace(redis, keys.prefix)
        await redis.aclose()
    return handled, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/8")
    parser.add_argument("--games", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument("--batch", type=int, default=30)
    parser.add_argument("--handle", type=int, default=10**9, help="Rounds to handle.")
    parser.add_argument("--script", type=Path, default=None)
    args = parser.parse_args()
    path = args.script or Path(f"/tmp/caravel-handle-{args.games}-{args.rounds}.pkl")
    if not path.exists():
        path.write_bytes(pickle.dumps(script(args.games, args.rounds)))
    games = pickle.loads(path.read_bytes())
    padded = [g + [None] * (args.rounds + 1 - len(g)) for g in games]
    handled, cpu = asyncio.run(run(args.redis_url, padded, args.batch, args.handle))
    print(f"{handled} commands, {1e6 * cpu / handled:.1f} µs of CPU per command in handle")


if __name__ == "__main__":
    main()
