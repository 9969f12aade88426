"""The engine's cache of games: each game's state at its last version, the command ids
already applied, its table's move deadline and its bots' seats, kept for the most recently
used games."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from redis.asyncio import Redis

from shared.bus import Keys
from shared.contracts import CommandEnvelope, Seats
from shared.eventstore import EventStore, GameCodec
from shared.games import api

CACHE_GAMES = 20_000


@dataclass
class CachedGame:
    """A cached game: which game it is (from the registry; None before its log begins), its
    state at ``version`` and the command ids already applied."""

    game: api.AnyGame | None
    state: Any
    version: int
    seen: dict[str, int] = field(default_factory=dict)
    final_recorded: bool = False
    deadline_s: float | None = None  # the table's move deadline, when its lobby set one
    # The seats a bot plays (or whose player had left) when the game was loaded, with the
    # bot's level (None: a leaver's): their decision requests carry the seat's own view, or
    # the part a greedy bot reads (``decision_requests``). A seat left since is not among
    # them: its requests come without one, and the bot player reads its projected view.
    bots: dict[int, str | None] = field(default_factory=dict)
    # The legal commands of each pending seat, by the JSON the engine last sent them as in
    # its decision requests, with the state and version they were listed at (``listed``).
    legal: tuple[Any, int, dict[int, dict[str, api.Command]]] | None = None

    def listed(self, command_json: str, seat: int | None) -> api.Command | None:
        """The legal command of ``seat`` whose JSON is ``command_json`` in the state as it
        is, if any: listed at this very state object and version (a decided command moves
        the version, a refused one leaves the state as it was, a crash drops the cached
        game), so the rules may take it as ``trusted`` and skip checking it again."""
        memo = self.legal
        if memo is None or memo[0] is not self.state or memo[1] != self.version:
            return None
        commands = memo[2].get(seat)  # type: ignore[arg-type]
        return None if commands is None else commands.get(command_json)

    @classmethod
    def of(cls, state: Any, version: int, seen: dict[str, int], seats: Seats) -> CachedGame:
        """A loaded game, its kind found from its state's type, with its table's deadline
        and bots."""
        game = None if state is None else api.of(state)
        return cls(game, state, version, seen, False, seats.deadline_s, seats.bot_levels())


async def table_seats(redis: Redis, keys: Keys, game_ids: Sequence[str]) -> dict[str, Seats]:
    """Each game's seats as its table set them (the seats hash the lobby writes before it
    creates the game; empty where no lobby set one), in one round trip."""
    async with redis.pipeline(transaction=False) as pipe:
        for game_id in game_ids:
            pipe.hgetall(keys.seats(game_id))
        found: list[Any] = await pipe.execute()
    return {g: Seats.from_hash(raw) for g, raw in zip(game_ids, found, strict=True)}


class GameCache:
    """The games an engine writes, least recently used first, loaded from the event store
    (snapshot and later events) when missing."""

    def __init__(self, redis: Redis, keys: Keys, store: EventStore, codec: GameCodec) -> None:
        self.redis, self.keys, self.store, self.codec = redis, keys, store, codec
        self.games: OrderedDict[str, CachedGame] = OrderedDict()

    async def prefetch(self, commands: Sequence[CommandEnvelope]) -> None:
        """Load every game of a batch that is not cached, in two round trips."""
        # Each command's game looked up: ``set - dict.keys()`` walks every cached game.
        missing = sorted({c.game_id for c in commands if c.game_id not in self.games})
        if not missing:
            return
        try:
            loaded = await self.store.load_many(missing, self.codec)
        except Exception:
            return  # some game does not load: each is loaded alone, isolating the failure
        seats = await table_seats(self.redis, self.keys, missing)
        for game_id, game in loaded.items():
            self.games[game_id] = CachedGame.of(game.state, game.version, game.seen, seats[game_id])
        while len(self.games) > CACHE_GAMES:
            self.games.popitem(last=False)

    async def get(self, game_id: str) -> CachedGame:
        """The game, cached or loaded (a game not begun yet is cached at version 0)."""
        game = self.games.get(game_id)
        if game is not None:
            self.games.move_to_end(game_id)
            return game
        loaded = await self.store.load(game_id, self.codec)
        seats = (await table_seats(self.redis, self.keys, [game_id]))[game_id]
        cached = CachedGame.of(loaded.state, loaded.version, loaded.seen, seats)
        self.games[game_id] = cached
        if len(self.games) > CACHE_GAMES:
            self.games.popitem(last=False)
        return cached

    def forget(self, p: int) -> None:
        """Drop the cached games of partition ``p``."""
        for game_id in [g for g in self.games if self.keys.partition(g) == p]:
            del self.games[game_id]

    def newly_over(self, game_id: str) -> bool:
        """The cached game is over and its final hash not yet recorded."""
        cached = self.games.get(game_id)
        if cached is None or cached.game is None or cached.final_recorded:
            return False
        return cached.game.is_over(cached.state)
