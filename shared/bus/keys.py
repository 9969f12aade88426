"""Redis key names. Every key of a partition carries the hash tag ``{p}``, so a partition's
keys share one Redis Cluster slot and the atomic append script stays legal on a cluster."""

from __future__ import annotations

import zlib
from dataclasses import dataclass

from redis.asyncio import Redis

from shared.contracts import command_key


@dataclass(frozen=True)
class Keys:
    """Key names under one ``prefix`` (tests use their own prefix as a namespace)."""

    prefix: str = "cv"
    partitions: int = 64

    def partition(self, game_id: str) -> int:
        """A game's partition: a stable hash of its id (the same in every process)."""
        return zlib.crc32(game_id.encode()) % self.partitions

    def _p(self, p: int) -> str:
        return f"{self.prefix}:{{{p}}}"

    def _g(self, game_id: str, what: str) -> str:
        return f"{self._p(self.partition(game_id))}:{what}:{game_id}"

    # Per game
    def log(self, game_id: str) -> str:
        """The game's event log: full events (with server-only values), id = version."""
        return self._g(game_id, "log")

    def meta(self, game_id: str) -> str:
        return self._g(game_id, "meta")

    def seen(self, game_id: str) -> str:
        """Command id -> the version after its events, of a game begun before the event
        store kept them in the game's meta (its append script): read, never written."""
        return self._g(game_id, "seen")

    def snapshot(self, game_id: str) -> str:
        return self._g(game_id, "snap")

    def seats(self, game_id: str) -> str:
        """Who plays each seat (human, bot:<level>, left) and the move deadline: the lobby's."""
        return self._g(game_id, "seats")

    def holders(self, game_id: str) -> str:
        """Seat -> its holder's id, or "-" for none: the lobby's cache of its SQL seats, so
        that a seat token is checked without SQL (filled on a miss, written on join and
        leave)."""
        return self._g(game_id, "holders")

    def view(self, game_id: str) -> str:
        """The game's projected views: the spectator's and each seat's (the views projection)."""
        return self._g(game_id, "view")

    def result(self, game_id: str, seat: int | None, command_id: str) -> str:
        """The engine's answer to a command sent to a game by a seat. Senders choose command
        ids, so two games or two seats may use the same one: the game is in the key, ended
        by a ``/`` (which a game id cannot hold), then the id scoped to its seat
        (:func:`~shared.contracts.command_key`), so no (game, seat, command) shares a key."""
        return f"{self.results(game_id)}/{command_key(seat, command_id)}"

    def results(self, game_id: str) -> str:
        """What the names of a game's answers (:meth:`result`) start with, before the ``/``."""
        return self._g(game_id, "result")

    def idempotency(self, p: int, client: str, key: str) -> str:
        """A client's Idempotency-Key record (the lobby's), in partition ``p``: the partition
        of the table the request makes or acts on, so that a shard away holds up only its own
        tables' keyed requests (issue 25: untagged, the records lay on any shard, and in the
        chaos benchmark most tables meant for the healthy shards were set up only once the
        hit shard's failover was over: create, join and start each met the shard away a
        third of the time)."""
        return f"{self._p(p)}:idempotency:{client}:{key}"

    # Per partition
    def commands(self, p: int) -> str:
        return f"{self._p(p)}:commands"

    def events(self, p: int) -> str:
        """Redacted events of every game of the partition, for every other service."""
        return f"{self._p(p)}:events"

    def decisions(self, p: int) -> str:
        return f"{self._p(p)}:decisions"

    def bot_decisions(self, p: int) -> str:
        """The decision requests of partition ``p``'s bot seats and leavers' seats: the bot
        player's (the event store's append routes each request by the seat's player)."""
        return f"{self._p(p)}:botdecisions"

    def view_updates(self, p: int) -> str:
        """The games whose view the projection wrote (``g``, at version ``v``), newest last,
        trimmed: whoever waits for a view blocks on it instead of polling the view."""
        return f"{self._p(p)}:viewed"

    def view_wants(self, p: int) -> str:
        """The partition's games whose views someone reads (``shared.contracts.ViewWant``:
        the game, for how many seconds from the entry's time): the views projection projects
        those only. Per partition, so a shard away holds up only its own games' wants (issue
        25: one global stream on one shard stopped every game's views while it was away; its
        old key ``<prefix>:viewwants`` is no longer read, see ``shared.bus.wants``)."""
        return f"{self._p(p)}:viewwants"

    def seat_changes(self, p: int) -> str:
        """The partition's seats of running games whose player changed (a human left: a
        ``shared.contracts.SeatChange``), for the bot players' books of who plays each seat.
        Per partition, so a shard away holds up only its own games' changes (issue 25: one
        global stream on one shard held a bot player's start, and every leave, while that
        shard was away; its old key ``<prefix>:seatchanges`` is no longer read, see
        ``shared.bus.seat_changes``)."""
        return f"{self._p(p)}:seatchanges"

    def rejections(self, p: int) -> str:
        return f"{self._p(p)}:rejections"

    def games(self, p: int) -> str:
        """The partition's games held in Redis (the engine adds one with its first event;
        archiving moves it to :meth:`archived`)."""
        return f"{self._p(p)}:games"

    def finished(self, p: int) -> str:
        """The partition's games in Redis that are over: the others are running."""
        return f"{self._p(p)}:finished"

    def archived(self, p: int) -> str:
        """The ids of the partition's games whose log was moved to the SQL archive: all that
        Redis keeps of them, so a reader knows where to look and no new game takes the id."""
        return f"{self._p(p)}:archived"

    def lease(self, p: int) -> str:
        return f"{self._p(p)}:lease"

    def deadlines(self, p: int) -> str:
        """The partition's pending decisions by deadline (a sorted set of ``[game, version,
        seat]``): humans' clocks, and requests to try again. Per partition, so a shard away
        or refusing writes holds up only its own games' deadlines (issue 25: one global set
        on one shard stalled every bot player's loop while that shard was away)."""
        return f"{self._p(p)}:deadlines"

    def dead_letters(self, p: int) -> str:
        """Entries of the partition's streams that kept failing: in the partition's slot, so
        moving one there and acknowledging it is one transaction on a cluster too."""
        return f"{self._p(p)}:deadletters"

    def partition_of(self, key: str) -> int:
        """The partition whose ``{p}`` tag a key of a partition carries."""
        head = f"{self.prefix}:{{"
        if not key.startswith(head) or "}" not in key:
            raise ValueError(f"{key!r} is not a key of a partition under {self.prefix!r}")
        return int(key[len(head) : key.index("}", len(head))])

    # Global
    def engines(self) -> str:
        """The live engines' heartbeats (a sorted set: engine -> expiry), read whole at each
        lease round to share the partitions out. Global (a membership read in one command),
        and on no path a move waits for: a round whose heartbeat its shard fails shares out
        as last seen and still renews and takes the leases of the shards that answer (issue
        25; ``shared.bus.connection.NodePipeline`` makes a one-node pipeline's fault its
        commands' replies, so a first round, the heartbeat alone, no longer raises)."""
        return f"{self.prefix}:engines"

    def matchmaker(self) -> str:
        """The lock that lets one lobby process match the queue at a time: an economy only
        (matching takes its tickets under SQL row locks), so its shard refusing writes holds
        no table back."""
        return f"{self.prefix}:matchmaker"

    def lost_games_pass(self) -> str:
        """Taken (for ``CARAVEL_LOST_GAME_CHECK_S``) by the lobby process that begins a pass
        through the running tables for lost games: one pass a period among all the lobbies.
        An economy only, like :meth:`matchmaker`: its shard refusing, a lobby goes on."""
        return f"{self.prefix}:matchmaker:lostgames"

    def tickets_queued(self) -> str:
        """A counter of the tickets queued so far, bumped by the lobby that took each one
        (after its commit): a matchmaker that saw it unchanged since a round that left no
        ticket waiting has nothing to match, and skips the SQL."""
        return f"{self.prefix}:matchmaker:queued"

    def sampler(self) -> str:
        """The lease of the one process that samples the consumer groups' lag and pending
        entries for the whole deployment (``RedisSampler``): every process reads the same
        figures from the same Redis, so one reading them is enough (an economy only: its
        shard away, no process exports those series meanwhile, and every process still
        reads the unlabelled gauges)."""
        return f"{self.prefix}:sampler"

    def legacy_deadlines(self) -> str:
        """Where the pending decisions of every partition were kept before
        :meth:`deadlines`: the bot player moves what it finds there to their partitions'
        (for one version: a lobby or bot player not yet upgraded still writes here)."""
        return f"{self.prefix}:deadlines"

    def all_partitions(self) -> range:
        return range(self.partitions)


async def delete_namespace(redis: Redis, prefix: str) -> None:
    """Delete every key under ``prefix:`` and nothing else (never a FLUSHALL)."""
    batch = []
    async for key in redis.scan_iter(match=f"{prefix}:*", count=1000):
        batch.append(key)
        if len(batch) >= 1000:
            await redis.delete(*batch)
            batch = []
    if batch:
        await redis.delete(*batch)
