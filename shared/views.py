"""The views projection's documents: a game's projected view for a seat or a spectator.

The lobby's views projector writes them (``Keys.view``: the version, the spectator view, and
per seat its part: how the seat's own view differs from the spectator's); the HTTP API and
the bot player read them here, without replaying a log. The public part is computed once per
game version (``Game.public_view``) and each seat's part alone (``Game.private_view``, its
number, legal commands and what else it alone sees): a game's views cost about one view to
make and to store, whatever the number of seats, and a seat's whole view is built when read.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from typing import Any

import structlog
from redis.asyncio import Redis

from shared.bus import Broker, Delivery, Follower, Keys, newest_ids
from shared.bus.faults import transient
from shared.bus.wants import KEPT_S, want
from shared.contracts import json_bytes, load_json
from shared.games import api

log = structlog.get_logger("caravel.views")

UPDATES_BATCH = 500
ASK_AGAIN_S = KEPT_S / 3  # a process reading a game's views asks for them again this often
# A partition's view updates no wait has used for this long are no longer read (see
# :class:`ViewWaiter`); the first wait on it after that follows it again.
FOLLOW_IDLE_S = 10.0


def view_documents(game: api.AnyGame, state: Any, seats: int) -> dict[str, bytes]:
    """The documents of a game's view hash at ``state`` (beside its version): the public
    view, the spectator's, computed once (``public``), and per seat only its private part
    (``seat:<n>``, the fields it sets over the public view), never a seat's whole view. A
    reader builds the view it asks for (:func:`assemble`), the game's ``view`` for it."""
    documents = {"public": json_bytes(game.public_view(state))}
    for seat in range(seats):
        documents[f"seat:{seat}"] = json_bytes({"set": game.private_view(state, seat)})
    return documents


def assemble(public: dict[str, Any], part: dict[str, Any] | None) -> dict[str, Any]:
    """A seat's whole view from the public view and its part (None: the spectator's view);
    ``public`` is changed and returned."""
    if part is not None:
        public.update(part["set"])
        for key in part.get("unset", ()):
            del public[key]
    return public


def seat_part(public: dict[str, Any], seat_view: dict[str, Any]) -> dict[str, Any]:
    """What a seat's view changes in the spectator's: the top-level fields it sets (new or
    different) and those it drops."""
    part: dict[str, Any] = {
        "set": {k: v for k, v in seat_view.items() if k not in public or public[k] != v}
    }
    dropped = [k for k in public if k not in seat_view]
    if dropped:
        part["unset"] = dropped
    return part


async def read_view(
    redis: Redis, keys: Keys, game_id: str, seat: int | None, at_least: int = 0
) -> dict[str, Any] | None:
    """A game's projected view for a seat (``None``: a spectator), or None if unknown (or,
    with ``at_least``, older than that version: not parsed, as a waiter reads it only to
    wait on). Its ``version`` is the version of the game's log it shows."""
    fields = ["version", "public"] + ([f"seat:{seat}"] if seat is not None else [])
    raw = await redis.hmget(keys.view(game_id), fields)
    if raw[1] is None or (at_least and int(raw[0] or 0) < at_least):
        return None
    part = load_json(raw[2]) if seat is not None and raw[2] is not None else None
    view = assemble(load_json(raw[1]), part)
    view["version"] = int(raw[0] or 0)
    return view


class ViewWaiter:
    """Waits for games' views to reach a version, for the HTTP API and the bot player.

    The views projection adds an entry (``g``: the game) to its partition's view updates
    (``Keys.view_updates``) with every view it writes. A :class:`~shared.bus.Follower` reads
    a partition's updates from the first wait on one of its games on, from the stream's tail
    without a group, and wakes the waiters of the games they name: a process waiting on many
    games reads each update once, and no wait polls.

    The projection projects only the games someone reads: every read asks for its game's
    views (``shared.bus.wants``) unless this process asked within :data:`ASK_AGAIN_S`
    (the projection keeps a game wanted :data:`~shared.bus.wants.KEPT_S`), and a read that
    asked waits for the version the game's log had then: a game no one read before, or
    lately, is read as eagerly projected views were (read-your-writes). A wait that runs
    out forgets that this process asked: the ask may have been lost (the wants' stream
    trimmed or refused while the projection was away), and a later read that did not ask
    would read a view the projection never writes (a game stuck waiting on a decision).

    A partition no wait has used for ``idle_s`` is no longer read: a lobby waits on a game's
    first view when its table starts, and then read every view update of every partition
    a table had started on, for nobody (an XREAD naming all of them per update, at 300
    tables as many reads as its fan-out's)."""

    def __init__(
        self, redis: Redis, keys: Keys, service: str, idle_s: float = FOLLOW_IDLE_S
    ) -> None:
        self.redis = redis
        self.keys = keys
        self.idle_s = idle_s
        self._used: dict[int, float] = {}  # a followed partition → when a wait last used it
        self._swept = time.monotonic()  # when idle partitions were last looked for
        self._sweeping: asyncio.Task[None] | None = None
        self.broker = Broker(redis, readers=keys.partitions, service=service)
        self._waiting: dict[str, set[asyncio.Future[None]]] = {}
        self._follower = Follower(self.broker, self._seen, batch=UPDATES_BATCH)
        self._starting = asyncio.Lock()
        self._asked: OrderedDict[str, float] = OrderedDict()  # game → when asked (monotonic)

    async def read(self, game_id: str, seat: int | None, wait_s: float) -> dict[str, Any] | None:
        """A game's view as the projection has it (None: no game), once it has reached the
        log's version if this read asked for the game's views (waiting ``wait_s`` at most)."""
        return await self.read_at(game_id, seat, 0, wait_s)

    async def read_at(
        self, game_id: str, seat: int | None, version: int, wait_s: float, keep: bool = True
    ) -> dict[str, Any] | None:
        """A game's view once the projection has reached ``version`` (and the log's version,
        if this read asked for its views), waiting up to ``wait_s``; after that, the newest
        view there is (older, or None). ``keep`` False: the game's views are wanted only
        for this read (projected once; the caller reads no more of them).

        The ask is a write to the game's partition's wanted views' stream, on the game's
        shard: while that shard refuses writes (NOREPLICAS, a master killed mid-failover), a
        read serves the view already projected, as a read that did not ask, instead of
        failing every first read of a game (issue 25); it asks again at its next read. With
        no view yet, the refusal is raised (a 503 to retry).

        A read that finds no view forgets that it asked, as a wait that runs out does: the
        ask may have found no log yet (a start answered 202: nothing to wait for) and then
        been lost (a Redis killed before its AOF kept it, a failover), and the game, its view
        never written, would read 404 until this process asked again minutes later (issue
        25: a stuck game whose view read 404 to the end of a chaos run)."""
        refused: Exception | None = None
        try:
            logged = await self._ask(game_id, keep)
        except Exception as error:
            if not transient(error):
                raise
            refused, logged = error, None
            log.warning("views not asked for, for now", game=game_id, error=str(error))
        if logged is not None:
            version = max(version, logged)
        if not (refused is None and wait_s > 0 and version > 0 and self._following(game_id)):
            view = await read_view(self.redis, self.keys, game_id, seat)
            if view is None and refused is not None:
                raise refused  # a game never projected, or none: say neither, a 503 to retry
            if _reached(view, version) or wait_s <= 0 or version == 0:
                if view is None:  # a miss: the next read asks again (see above)
                    self._asked.pop(game_id, None)
                return view
            await self._follow(self.keys.partition(game_id))
        # else its partition's updates are read already: the loop's first read is the read
        # (a bot's request comes as its event does, and the projection has seldom written
        # the view yet: two reads and two parses of a view too old were made per move)
        view = await self._wait(game_id, seat, version, wait_s)
        if view is not None:
            return view
        self._asked.pop(game_id, None)  # the ask may be lost: the next read asks again
        return await read_view(self.redis, self.keys, game_id, seat)  # the newest there is

    async def _wait(
        self, game_id: str, seat: int | None, version: int, wait_s: float
    ) -> dict[str, Any] | None:
        """The view once it reaches ``version``, its partition's updates followed (None after
        ``wait_s``). A view read too old is not parsed: only its version is looked at."""
        give_up = time.monotonic() + wait_s
        while (left := give_up - time.monotonic()) > 0:
            woken: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._waiting.setdefault(game_id, set()).add(woken)
            try:  # waiting before the read: a view written after it wakes this one
                view = await read_view(self.redis, self.keys, game_id, seat, at_least=version)
                if view is not None:
                    return view
                await asyncio.wait_for(woken, left)
            except TimeoutError:
                break
            finally:
                self._forget(game_id, woken)
                self._used[self.keys.partition(game_id)] = time.monotonic()
        return None

    def _following(self, game_id: str) -> bool:
        """Whether the updates of the game's partition are read already (:meth:`_follow`)."""
        return self.keys.view_updates(self.keys.partition(game_id)) in self._follower

    async def _ask(self, game_id: str, keep: bool) -> int | None:
        """Ask the projection for the game's views, unless this process asked within
        :data:`ASK_AGAIN_S`: the version of the game's log then (0: no log), else None."""
        now = time.monotonic()
        if keep and now - self._asked.get(game_id, -ASK_AGAIN_S) < ASK_AGAIN_S:
            return None
        async with self.redis.pipeline(transaction=False) as pipe:
            await want(self.broker, pipe, self.keys, game_id, KEPT_S if keep else 0)
            pipe.hget(self.keys.meta(game_id), "version")
            replies: Any = await pipe.execute()
        if keep:
            self._asked[game_id] = now
            self._asked.move_to_end(game_id)
            while next(iter(self._asked.values())) < now - ASK_AGAIN_S:
                self._asked.popitem(last=False)
        return int(replies[1] or 0)

    async def close(self) -> None:
        """Stop the subscribers (at shutdown, before the Redis client goes away)."""
        if self._sweeping is not None:
            await self._sweeping
        await self._follower.close()
        await self.broker.stop()

    async def _follow(self, p: int) -> None:
        """Have partition ``p``'s updates read from its tail on, taken now (before the
        waiter reads the view again: nothing written after that read is missed). A partition
        already followed costs no lock: its subscriber reads from the tail taken before it
        was listed, whether or not it has started yet."""
        stream = self.keys.view_updates(p)
        if stream in self._follower:
            return
        async with self._starting:
            if stream in self._follower:
                return
            after = (await newest_ids(self.redis, [stream]))[stream]
            await self.broker.connect()
            await self._follower.add(stream, after)
            self._used[p] = time.monotonic()

    async def _unfollow_idle(self) -> None:
        """Stop reading the partitions no wait has used for ``idle_s`` and none waits on.
        Checked and dropped with no await between (:meth:`Follower.remove` forgets the
        stream before its first await): a wait that starts afterwards sees the partition
        unfollowed and follows it again from its tail then (:meth:`_follow`)."""
        async with self._starting:
            for p, used in list(self._used.items()):
                now = time.monotonic()
                if now - used <= self.idle_s or self._used.get(p) != used:
                    continue
                if any(self.keys.partition(game_id) == p for game_id in self._waiting):
                    continue
                del self._used[p]
                await self._follower.remove(self.keys.view_updates(p))

    def _sweep(self) -> None:
        """Look for idle partitions every ``idle_s / 2`` (from the updates' handler: a
        partition nobody reads brings no batch, and costs no read but the idle block), in
        a task of its own: its read's subscriber may be stopped."""
        now = time.monotonic()
        if now - self._swept < self.idle_s / 2 or (
            self._sweeping is not None and not self._sweeping.done()
        ):
            return
        self._swept = now
        self._sweeping = asyncio.create_task(self._unfollow_idle())

    async def _seen(self, deliveries: list[Delivery]) -> None:
        self._sweep()
        if not self._waiting:
            return
        for delivery in deliveries:
            for woken in self._waiting.get(delivery.fields[b"g"].decode(), ()):
                if not woken.done():
                    woken.set_result(None)

    def _forget(self, game_id: str, woken: asyncio.Future[None]) -> None:
        waiting = self._waiting.get(game_id)
        if waiting is not None:
            waiting.discard(woken)
            if not waiting:
                del self._waiting[game_id]


def _reached(view: dict[str, Any] | None, version: int) -> bool:
    return view is not None and view["version"] >= version
