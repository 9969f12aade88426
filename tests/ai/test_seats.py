"""The bot player's seat book: final seats (bots, leavers) read once; humans every time, or
once while the book follows the seat changes."""

from __future__ import annotations

from typing import Any

from redis.asyncio import Redis

from services.ai.seats import SeatBook, bot_level
from shared.bus import Broker, Keys
from shared.bus.seat_changes import seat_changed
from shared.contracts import Seats
from shared.contracts.records import HUMAN, LEFT

from ..backbone.helpers import wait_for


async def _seat(redis: Redis, keys: Keys, game_id: str, players: dict[int, str]) -> None:
    mapping: dict[Any, Any] = Seats(players).to_mapping()
    await redis.hset(keys.seats(game_id), mapping=mapping)


async def test_a_human_who_leaves_is_seen_at_once_and_a_bot_seat_is_read_once(
    redis: Redis, keys: Keys
) -> None:
    """Seat 0 a human, seat 1 a bot. After one reading the hash is rewritten behind the
    book's back: the human seat is read again (it left: ``left`` at once, as the lobby's
    leave writes it), the bot seat is not (a running table's bot never changes; the book
    still says the bot although the hash now says otherwise)."""
    await _seat(redis, keys, "g-book", {0: HUMAN, 1: "bot:greedy"})
    book = SeatBook(redis, keys)
    first = await book.players([("g-book", 0), ("g-book", 1), ("g-none", 0)])
    assert first == {("g-book", 0): HUMAN, ("g-book", 1): "bot:greedy", ("g-none", 0): None}
    await _seat(redis, keys, "g-book", {0: LEFT, 1: HUMAN})
    again = await book.players([("g-book", 0), ("g-book", 1)])
    assert again == {("g-book", 0): LEFT, ("g-book", 1): "bot:greedy"}
    assert bot_level(again[("g-book", 1)]) == "greedy" and bot_level(LEFT) is None


async def test_the_book_keeps_a_bounded_number_of_games(redis: Redis, keys: Keys) -> None:
    """Past ``kept`` games the least recently used is dropped (and read again if asked)."""
    book = SeatBook(redis, keys, kept=2)
    for game in ("g-1", "g-2", "g-3"):
        await _seat(redis, keys, game, {0: "bot:random"})
        await book.players([(game, 0)])
    assert list(book.known) == ["g-2", "g-3"]


async def test_a_following_book_reads_a_human_seat_once_and_again_once_it_is_named(
    redis: Redis, keys: Keys
) -> None:
    """The bot player's book follows the seat changes: a human seat is read once (a hash
    rewritten behind its back is not seen), and read again once the lobby's leave names it
    on the seat changes' stream."""
    await _seat(redis, keys, "g-follow", {0: HUMAN, 1: HUMAN})
    broker = Broker(redis, readers=keys.partitions, service="test")
    await broker.start()
    book = SeatBook(redis, keys)
    await book.follow(broker)
    both = [("g-follow", 0), ("g-follow", 1)]
    try:
        assert await book.players(both) == {("g-follow", 0): HUMAN, ("g-follow", 1): HUMAN}
        await _seat(redis, keys, "g-follow", {0: LEFT, 1: LEFT})
        assert await book.players(both) == {("g-follow", 0): HUMAN, ("g-follow", 1): HUMAN}
        async with redis.pipeline(transaction=False) as pipe:
            await seat_changed(broker, pipe, keys, "g-follow", 1)
            await pipe.execute()

        async def seen() -> bool:
            return (await book.players([("g-follow", 1)]))[("g-follow", 1)] == LEFT

        await wait_for(seen)
    finally:
        await book.close()
        await broker.stop()
