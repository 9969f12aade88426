"""Who plays each seat, as the bot player needs it for every decision request.

A running table takes no joins, so a seat's player changes once at most: a human may leave
(the lobby writes ``left``). A bot seat stays that bot and a left seat stays left, so those
are kept per game and not read again; a human seat, which may leave at any moment, is read
again for each request (so a leaver's next decision goes to the fallback at once). Requests
of one batch are read in one round trip.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable
from typing import Any

from redis.asyncio import Redis

from shared.bus import Keys
from shared.contracts import Seats
from shared.contracts.records import BOT_PREFIX, LEFT

KEPT_GAMES = 10_000  # games whose final seats are kept, least recently used dropped first


def final(who: str) -> bool:
    """A seat's player that can no longer change: a bot, or a player who left."""
    return who == LEFT or who.startswith(BOT_PREFIX)


class SeatBook:
    """The seats of the games a bot player answers for, read once where they are final."""

    def __init__(self, redis: Redis, keys: Keys, kept: int = KEPT_GAMES) -> None:
        self.redis, self.keys, self.kept = redis, keys, kept
        self.known: OrderedDict[str, dict[int, str]] = OrderedDict()

    async def players(self, wanted: Iterable[tuple[str, int]]) -> dict[tuple[str, int], str | None]:
        """Each (game, seat)'s player (``human``, ``bot:<level>``, ``left``; None: no lobby
        seated anyone), the games with a seat not known final read in one pipeline."""
        wanted = list(wanted)
        found: dict[tuple[str, int], str | None] = {}
        for game_id, seat in wanted:
            seats = self.known.get(game_id)
            if seats is not None and seat in seats:
                self.known.move_to_end(game_id)
                found[(game_id, seat)] = seats[seat]
        games = sorted({g for g, s in wanted if (g, s) not in found})
        if games:
            async with self.redis.pipeline(transaction=False) as pipe:
                for game_id in games:
                    pipe.hgetall(self.keys.seats(game_id))
                raws: list[Any] = await pipe.execute()
            read = {g: Seats.from_hash(raw).players for g, raw in zip(games, raws, strict=True)}
            for game_id, players in read.items():
                self._keep(game_id, players)
            for game_id, seat in wanted:
                if (game_id, seat) not in found:
                    found[(game_id, seat)] = read[game_id].get(seat)
        return found

    def _keep(self, game_id: str, players: dict[int, str]) -> None:
        kept = {seat: who for seat, who in players.items() if final(who)}
        if not kept:
            return
        self.known.setdefault(game_id, {}).update(kept)
        self.known.move_to_end(game_id)
        while len(self.known) > self.kept:
            self.known.popitem(last=False)


def bot_level(who: str | None) -> str | None:
    """The level of a bot seat's player (None: not a bot)."""
    return who.removeprefix(BOT_PREFIX) if who and who.startswith(BOT_PREFIX) else None
