"""Sending commands to the engine: onto the game's partition command stream."""

from __future__ import annotations

from redis.asyncio import Redis

from shared.contracts import CommandEnvelope, CommandResult
from shared.eventstore import EventStore

from .keys import Keys


class CommandSender:
    """Puts commands on partition command streams and reads their results."""

    def __init__(self, redis: Redis, keys: Keys) -> None:
        self.redis = redis
        self.keys = keys
        self.store = EventStore(redis, keys)

    async def send(self, command: CommandEnvelope) -> str:
        """Queue ``command``; returns the stream entry id. The engine answers asynchronously."""
        stream = self.keys.commands(self.keys.partition(command.game_id))
        entry = await self.redis.xadd(stream, {"c": command.model_dump_json()})
        return entry.decode() if isinstance(entry, bytes) else str(entry)

    async def send_raw(self, game_id: str, payload: bytes | str) -> str:
        """Queue anything at all on a game's partition stream (the engine must survive it)."""
        stream = self.keys.commands(self.keys.partition(game_id))
        entry = await self.redis.xadd(stream, {"c": payload})
        return entry.decode() if isinstance(entry, bytes) else str(entry)

    async def result(self, command: CommandEnvelope, timeout_s: float = 0) -> CommandResult | None:
        """The engine's answer to ``command`` (waiting up to ``timeout_s``)."""
        return await self.store.result(command.game_id, command.command_id, timeout_s)  # type: ignore[no-any-return]

    async def execute(self, command: CommandEnvelope, timeout_s: float = 5) -> CommandResult:
        """Send and wait for the answer; raises TimeoutError when none comes in time."""
        await self.send(command)
        result = await self.result(command, timeout_s)
        if result is None:
            raise TimeoutError(f"no answer to command {command.command_id} in {timeout_s}s")
        return result
