"""Moving a partition's slot to another master while the engine serves it (the resharding a
growing cluster does): every command is applied once and answered, and every log stays
gap-free. The slot moves as ``redis-cli --cluster reshard`` moves one: the target imports
it, the source migrates it key by key (``MIGRATE``), then every master is told its node;
meanwhile clients are sent on (``ASK``, ``TRYAGAIN``, ``MOVED``)."""

from __future__ import annotations

import asyncio
from typing import Any

from redis.asyncio import Redis
from redis.crc import key_slot

from services.engine.worker import GROUP
from shared.bus import CommandSender, Keys, connect, delete_namespace
from shared.bus.faults import transient
from shared.contracts import CommandEnvelope

from .helpers import play_locally, running_engine, same_partition


async def _node_id(node: Redis) -> str:
    raw: Any = await node.execute_command("CLUSTER", "MYID")
    return raw.decode() if isinstance(raw, bytes) else str(raw)


async def move_slot(client: Any, slot: int, keys_per_step: int = 2) -> tuple[int, int]:
    """Move ``slot`` from its master to another; returns (source port, target port)."""
    source_node = client.nodes_manager.get_node_from_slot(slot)
    target_node = next(n for n in client.get_primaries() if n.name != source_node.name)
    source = Redis(host=source_node.host, port=source_node.port)
    target = Redis(host=target_node.host, port=target_node.port)
    try:
        source_id, target_id = await _node_id(source), await _node_id(target)
        await target.execute_command("CLUSTER", "SETSLOT", slot, "IMPORTING", source_id)
        await source.execute_command("CLUSTER", "SETSLOT", slot, "MIGRATING", target_id)
        while moving := await source.execute_command(
            "CLUSTER", "GETKEYSINSLOT", slot, keys_per_step
        ):
            await source.execute_command(
                "MIGRATE", target_node.host, target_node.port, "", 0, 5000, "KEYS", *moving
            )
            await asyncio.sleep(0.02)  # the load goes on between steps
        for node in [target, source]:
            await node.execute_command("CLUSTER", "SETSLOT", slot, "NODE", target_id)
        for primary in client.get_primaries():
            if primary.name not in (source_node.name, target_node.name):
                other = Redis(host=primary.host, port=primary.port)
                await other.execute_command("CLUSTER", "SETSLOT", slot, "NODE", target_id)
                await other.aclose()
    finally:
        await source.aclose()
        await target.aclose()
    return source_node.port, target_node.port


async def test_a_partition_moved_to_another_master_under_load_loses_and_repeats_nothing(
    redis_cluster_url: str, keys: Keys
) -> None:
    client: Any = connect(redis_cluster_url)
    moved = same_partition(keys, "g-move", 3)
    games = {g: play_locally(g, players=2, seed=30 + i, limit=40) for i, g in enumerate(moved)}
    sender = CommandSender(client, keys)
    answers: dict[str, list[Any]] = {g: [] for g in games}
    retried: set[str] = set()  # commands sent again after a transient fault

    async def play(game_id: str, commands: list[CommandEnvelope]) -> None:
        for command in commands:
            while True:  # as a client does with a 503: the same command again
                try:
                    result = await sender.execute(command, timeout_s=20)
                    break
                except Exception as e:  # TRYAGAIN or MOVED/ASK past redis-py's TTL, or
                    if not (transient(e) or isinstance(e, TimeoutError)):  # no answer yet
                        raise
                    retried.add(command.command_id)
                    await asyncio.sleep(0.1)
            answers[game_id].append((result.status, result.version))

    try:
        await client.initialize()
        slot = key_slot(keys.log(moved[0]).encode())
        async with running_engine(client, keys):
            players = [asyncio.create_task(play(g, c)) for g, (c, _) in games.items()]
            while sum(map(len, answers.values())) < 15:  # under way
                await asyncio.sleep(0.01)
            before = sum(map(len, answers.values()))
            source, target = await move_slot(client, slot)
            during = sum(map(len, answers.values())) - before
            await asyncio.gather(*players)
        total = sum(len(c) for c, _ in games.values())
        assert before < total  # the move began with commands still to come
        print(f"slot {slot}: {before} answers before the move, {during} during, of {total}")
        assert source != target
        assert client.nodes_manager.get_node_from_slot(slot).port == target
        for game_id, (commands, final) in games.items():
            for command, (status, _) in zip(commands, answers[game_id], strict=True):
                # sent again, a command the engine had applied is answered as a duplicate
                expected = (
                    {"accepted", "duplicate"} if command.command_id in retried else {"accepted"}
                )
                assert status in expected, answers[game_id]
            assert answers[game_id][-1][1] == final.version
            log = await client.xrange(keys.log(game_id))
            assert [entry_id for entry_id, _ in log] == [
                f"{v}-0".encode() for v in range(1, final.version + 1)
            ]
            for command in commands:  # one answer a send, none twice
                left = await client.llen(keys.result(game_id, command.seat, command.command_id))
                assert left == 1 or (command.command_id in retried and left <= 2)
        stream = keys.commands(keys.partition(moved[0]))
        assert (await client.xpending(stream, GROUP))["pending"] == 0
    finally:
        await delete_namespace(client, keys.prefix)
        await client.aclose()
