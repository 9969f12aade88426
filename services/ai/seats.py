"""Who plays each seat, as the bot player needs it for every decision request.

A running table takes no joins, so a seat's player changes once at most: a human may leave
(the lobby writes ``left`` and names the seat on its partition's seat changes' stream,
``shared.bus.seat_changes``). A book that follows those streams (:meth:`SeatBook.follow`:
the bot player's) keeps every seat it read, humans too, of the partitions it follows, and
reads a seat again once it is named there: no read per human decision (issue 24). It keeps
only the seats that can no longer change (a bot, a leaver) of the other partitions (those
whose shard did not answer yet, and every partition of a book that does not follow), and
reads a human seat there for each request. Either way a leaver's next decision goes to the
fallback at once. Requests of one batch are read in one round trip.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable
from typing import Any

from redis.asyncio import Redis

from shared.bus import Broker, Delivery, Follower, Keys
from shared.bus.seat_changes import changed_seat
from shared.bus.tails import tails_that_answer
from shared.contracts import Seats
from shared.contracts.records import BOT_PREFIX, final

KEPT_GAMES = 10_000  # games whose seats are kept, least recently used dropped first
CHANGES_BATCH = 500


class SeatBook:
    """The seats of the games a bot player answers for, read once (humans' too while the
    book follows the seat changes)."""

    def __init__(self, redis: Redis, keys: Keys, kept: int = KEPT_GAMES) -> None:
        self.redis, self.keys, self.kept = redis, keys, kept
        self.known: OrderedDict[str, dict[int, str]] = OrderedDict()
        self._changes: Follower | None = None
        self._followed: set[int] = set()  # the partitions whose changes are followed
        self._changed = 0  # changes seen: a read that a change overtook keeps no human

    @property
    def following(self) -> bool:
        """Whether every partition's changes are followed."""
        return len(self._followed) == self.keys.partitions

    async def follow(self, broker: Broker) -> list[Exception]:
        """Follow the seat changes of the partitions not followed yet, each from its tail
        (before any request is answered): from then on their human seats are kept too, and
        read again when one is named there. Returns the errors of the partitions whose shard
        did not answer (away, or refusing), for the caller to try again: the others are
        followed meanwhile (issue 25: one stream for all held the bot player's start while
        its shard was away). Raises when none answers (Redis away)."""
        if self._changes is None:
            self._changes = Follower(broker, self._seen, batch=CHANGES_BATCH)
        missing = [
            self.keys.seat_changes(p) for p in self.keys.all_partitions() if p not in self._followed
        ]
        failed: list[Exception] = []
        for stream, tail in (await tails_that_answer(self.redis, missing)).items():
            if isinstance(tail, Exception):
                failed.append(tail)
                continue
            try:
                await self._changes.add(stream, tail)
            except Exception as error:  # its shard went away meanwhile: the next try
                failed.append(error)
                continue
            self._followed.add(self.keys.partition_of(stream))
        if failed and len(failed) == len(missing) and not self._followed:
            raise failed[0]
        return failed

    async def close(self) -> None:
        """Stop following the seat changes (and forget the human seats kept: changes are
        not seen from now on)."""
        changes, self._changes, self._followed = self._changes, None, set()
        self.known.clear()
        if changes is not None:
            await changes.close()

    async def players(self, wanted: Iterable[tuple[str, int]]) -> dict[tuple[str, int], str | None]:
        """Each (game, seat)'s player (``human``, ``bot:<level>``, ``left``; None: no lobby
        seated anyone), the games with a seat not known read in one pipeline."""
        wanted = list(wanted)
        found: dict[tuple[str, int], str | None] = {}
        for game_id, seat in wanted:
            seats = self.known.get(game_id)
            if seats is not None and seat in seats:
                self.known.move_to_end(game_id)
                found[(game_id, seat)] = seats[seat]
        games = sorted({g for g, s in wanted if (g, s) not in found})
        if games:
            changed, followed = self._changed, set(self._followed)  # as the read starts
            async with self.redis.pipeline(transaction=False) as pipe:
                for game_id in games:
                    pipe.hgetall(self.keys.seats(game_id))
                raws: list[Any] = await pipe.execute()
            read = {g: Seats.from_hash(raw).players for g, raw in zip(games, raws, strict=True)}
            unchanged = changed == self._changed
            for game_id, players in read.items():
                humans = unchanged and self.keys.partition(game_id) in followed
                self._keep(game_id, players, humans)
            for game_id, seat in wanted:
                if (game_id, seat) not in found:
                    found[(game_id, seat)] = read[game_id].get(seat)
        return found

    def _keep(self, game_id: str, players: dict[int, str], humans: bool) -> None:
        kept = {seat: who for seat, who in players.items() if humans or final(who)}
        if not kept:
            return
        self.known.setdefault(game_id, {}).update(kept)
        self.known.move_to_end(game_id)
        while len(self.known) > self.kept:
            self.known.popitem(last=False)

    async def _seen(self, deliveries: list[Delivery]) -> None:
        """Forget the seats named: their next request reads them again."""
        self._changed += 1
        for delivery in deliveries:
            game_id, seat = changed_seat(delivery.fields)
            seats = self.known.get(game_id)
            if seats is not None:
                seats.pop(seat, None)


def bot_level(who: str | None) -> str | None:
    """The level of a bot seat's player (None: not a bot)."""
    return who.removeprefix(BOT_PREFIX) if who and who.startswith(BOT_PREFIX) else None
