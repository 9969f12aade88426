"""An engine worker killed with SIGKILL mid-run loses no command and applies none twice."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest
from redis.asyncio import Redis

from shared.bus import CommandSender, Keys
from shared.eventstore import EventStore
from shared.games import age_of_discovery as aod

from .helpers import RULES, play_locally, wait_for


@pytest.fixture
def redis(any_redis: Redis) -> Redis:
    """Every test here runs on one Redis and again on the session's Redis Cluster."""
    return any_redis


def start_worker(redis_url: str, keys: Keys) -> subprocess.Popen[bytes]:
    env = {
        **os.environ,
        "CARAVEL_REDIS_URL": redis_url,
        "CARAVEL_KEY_PREFIX": keys.prefix,
        "CARAVEL_PARTITIONS": str(keys.partitions),
        "CARAVEL_LEASE_TTL_MS": "1000",
        "CARAVEL_CLAIM_IDLE_MS": "500",
        "CARAVEL_BATCH_SIZE": "20",
        "CARAVEL_SNAPSHOT_EVERY": "30",
    }
    return subprocess.Popen(
        [sys.executable, "-m", "services.cli", "engine"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


async def test_sigkill_mid_run_another_worker_takes_over(
    redis: Redis, any_redis_url: str, keys: Keys
) -> None:
    games = {f"g-kill-{i}": play_locally(f"g-kill-{i}", players=3, seed=20 + i) for i in range(6)}
    sender = CommandSender(redis, keys)
    store = EventStore(redis, keys)
    first = start_worker(any_redis_url, keys)
    try:
        # Queue every game's whole command sequence; the worker churns through them.
        for commands, _ in games.values():
            for command in commands:
                await sender.send(command)

        async def some_progress() -> bool:
            versions = [await store.version(g) for g in games]
            return sum(versions) > 200

        await wait_for(some_progress, timeout_s=60)
        first.send_signal(signal.SIGKILL)
        first.wait(timeout=10)
        done_before = [await store.version(g) for g in games]
        finals = {g: state.version for g, (_, state) in games.items()}
        assert done_before != list(finals.values())  # killed mid-run, not after

        second = start_worker(any_redis_url, keys)
        try:

            async def all_done() -> bool:
                return all([await store.version(g) == v for g, v in finals.items()])

            await wait_for(all_done, timeout_s=90)
        finally:
            second.send_signal(signal.SIGTERM)
            try:
                assert second.wait(timeout=20) == 0  # a graceful stop on SIGTERM
            finally:
                if second.poll() is None:
                    second.kill()
    finally:
        if first.poll() is None:
            first.kill()

    for game_id, (commands, final) in games.items():
        events = await store.read(game_id)
        assert [e.version for e in events] == list(range(1, final.version + 1))
        replayed = aod.replay(RULES, [aod.Event(e.type, e.data, e.secret) for e in events])
        assert replayed.state_hash() == final.state_hash()
        seen = await store.seen(game_id)
        assert sorted(seen) == sorted(c.key for c in commands)  # none lost
        # None applied twice: each command's events were caused by it exactly once.
        causes = [e.causation_id for e in events]
        assert len(set(causes)) == len(commands)
    rejected = [await redis.xlen(keys.rejections(p)) for p in keys.all_partitions()]
    assert sum(rejected) == 0
