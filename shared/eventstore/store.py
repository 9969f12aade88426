"""The game event log on Redis Streams.

One stream per game holds its log, with entry id ``<version>-0`` so Redis itself refuses an
out-of-order version. One Lua script appends a command's events atomically: it checks the
expected version and the command id, adds the events to the game's log (the server-only part
in a field of its own) and, redacted, as one entry per command to the partition's event
stream (``g`` game, ``v`` last version, ``n`` count, ``e`` JSON array), records the command's
id in the game's meta (with the version, in one write), stores the sender's result (none for
the bot player's commands: it reads none), acknowledges the command stream entry and adds
any decision requests. A stale version is a conflict and writes nothing. A command has one
answer: a result is stored only where its command has none yet. A command decided again
after its append was made (the call's reply lost to a closed connection and the entry
handled again, or the same command sent twice) is a duplicate whose sender has its answer
already.

Durability: replication is asynchronous, so an append acknowledged just before its master
fails can vanish with it. With ``replicas`` set, the store asks every master it wrote to
(``WAIT``, on the connection that wrote, in the same round trip) for that many replicas to
hold the appends, and only then stores the senders' results; an append not replicated in
time is in the log but unanswered (its sender times out, and asking again with the same
command id gets the answer once the replicas have it).

A finished game's log moves to the SQL archive (``archive.py``); Redis then keeps only its id,
in the partition's ``archived`` set. Given the archive, :meth:`EventStore.read_many` (and so
``read``, ``load`` and ``load_many``) and :meth:`EventStore.seats` read an archived game
from there, so readers need not know where a game lives; an append that would start a new
game under an archived id is refused.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import chain
from operator import itemgetter
from time import time
from typing import Any, NamedTuple

from redis.asyncio import Redis

from shared.bus.connection import is_cluster
from shared.bus.deadlines import wake_horizon
from shared.bus.faults import transient
from shared.bus.keys import Keys
from shared.bus.scripts import Batch, call
from shared.contracts import (
    CommandResult,
    EncodedEvent,
    EventEnvelope,
    Kept,
    command_key,
    dump_json,
    id_json,
    new_tuple,
    string_json,
)
from shared.redis_replies import text as _text

from .reading import ArchiveReader, EventReader
from .scripts import SCRIPTS

RESULT_TTL_S = 3600
APPEND_KEYS_KEPT = 65_536  # games whose append keys a store keeps formatted

_public = itemgetter(0)  # an encoded event's public JSON
_secret = itemgetter(1)  # and its server-only part's ("" none)


def _append_keys(keys: Keys, game_id: str) -> tuple[tuple[str, ...], tuple[str, str, str, str]]:
    """The keys an append to ``game_id`` always writes, in the script's order, and those
    only some write (its snapshot; its partition's games and archived games, for a new
    game; what its answers' names start with). Formatted once per game, not once per
    command (each with the game's partition hashed): kept by :meth:`EventStore._append_keys`."""
    k, p = keys, keys.partition(game_id)
    always = (k.log(game_id), k.events(p), k.meta(game_id), k.seen(game_id))
    routed = (k.seats(game_id), k.deadlines(p), k.bot_decisions(p))
    return (*always, k.commands(p), k.decisions(p), *routed), (
        k.snapshot(game_id),
        k.games(p),
        k.archived(p),
        k.results(game_id),
    )


class Pending(NamedTuple):
    """A decision request an append adds: its seat, when the seat's time runs out (a Unix
    time) and the request as JSON. The append script reads who plays the seat (the seats
    hash): a human's clock starts among the partition's deadlines (``[game, version,
    seat]`` due then), a bot's or a leaver's request goes to the bot player's stream too
    (``Keys.bot_decisions``); every request goes to the decisions stream the sockets read.
    ``view``: the seat's own view's JSON ("" none), put into the request only on the bot
    player's stream (the engine makes it for the seats it read as bots')."""

    seat: int
    due: float
    json: str
    view: str = ""


@dataclass
class Append:
    """One command's events to append at ``expected`` version, with what goes with them."""

    game_id: str
    expected: int
    events: Sequence[EncodedEvent]
    command_id: str = ""
    entry: tuple[int, str] | None = None  # (partition, command stream entry id) to acknowledge
    decisions: Sequence[Pending] = ()  # the decision requests at ``version``
    # Whether ``decisions`` are every seat's at ``version`` (the game's state after the
    # append) and the game is over: None, not given (an append before another of its game
    # in the batch, a log moved in); then the game's meta keeps no pending requests for it.
    over: bool | None = None
    seat: int | None = None  # the command's seat: its id is scoped to it (``command_key``)
    snapshot: str = ""  # the game's state JSON at ``version``, stored if the append is made
    # True: the append ends its game, and its entry is acknowledged when the game's end is
    # recorded (:meth:`EventStore.record_final_hash`), not with the append: an engine that
    # stops in between leaves it pending, to come again (a duplicate) and record the end.
    held: bool = False
    # The command's id scoped to its seat (``command_key``), when its maker has it already
    # ("": made from ``seat`` and ``command_id`` when the append is sent).
    key: str = ""
    # False: no answer is stored for its sender, who reads none (``CommandEnvelope.answered``);
    # its id is recorded all the same.
    answered: bool = True

    @property
    def version(self) -> int:
        return self.expected + len(self.events)


class AppendResult(NamedTuple):
    """An append's outcome (a named tuple: one is made per command appended)."""

    # "ok", "duplicate", "conflict", "archived" (the id is an archived game's), or "failed":
    # its shard refused it for now (``shared.bus.faults``), nothing written: try again later
    status: str
    version: int
    answered: bool = True  # False: appended, but not on enough replicas to tell the sender
    error: Exception | None = None  # why it "failed"


def _result(a: Append, reply: Any, j: int) -> AppendResult:
    """The ``j``-th append's result from its script call's reply. A transient error is the
    call's appends' alone (a cluster's other shards took theirs); any other is raised."""
    if isinstance(reply, Exception):
        if not transient(reply):
            raise reply
        return AppendResult("failed", a.expected, error=reply)
    return AppendResult(_status(reply[2 * j]), int(reply[2 * j + 1]))


def _results(reply: Any) -> list[AppendResult]:
    """Every append's result from one call's reply, a list of (status, version) pairs:
    :func:`_result` of each, built without a Python call per append."""
    return [
        new_tuple(AppendResult, (_status(status), int(version), True, None))
        for status, version in zip(reply[::2], reply[1::2], strict=True)
    ]


_status: Callable[[Any], str] = Kept(_text, 64).__getitem__
"""A status of the append script's reply as text (a handful of words, decoded once)."""


@dataclass(frozen=True)
class Held:
    """What a consumer holds of a game's log: the version it applied last and that event's
    id. A failover can roll a log back (the new master lacked the tail the old one
    acknowledged) and the engine then writes other events at the same versions: the version
    alone does not tell the two logs apart, the event id does."""

    version: int
    event_id: str | None

    def range(self, upto: int | None = None) -> tuple[int, int | None]:
        """The ``read_many`` range from the held event (included, to check it) up to
        ``upto`` (None: the end; never below the held event)."""
        return (max(self.version - 1, 0), None if upto is None else max(upto, self.version))

    def went_back(self, event_id: str | None) -> bool:
        """The log's event at the version held is ``event_id`` (None: it has none there,
        :meth:`~.reading.EventReader.read_past`): it went back if that is not the event
        held (a row without an event id checks the version alone)."""
        if self.version == 0:
            return False
        return event_id is None or (self.event_id is not None and event_id != self.event_id)

    def rolled_back(self, events: Sequence[EventEnvelope]) -> bool:
        """``events``, read by :meth:`range`, no longer start with the event held: the log
        went back (shorter than the version held, or another event at it). A consumer then
        rebuilds the game from the log instead of diverging from it."""
        if self.version == 0:
            return False
        if not events or events[0].version != self.version:
            return True
        return self.event_id is not None and events[0].event_id != self.event_id


class EventStore(EventReader):
    """Append, read and snapshot game logs (reading: :class:`~.reading.EventReader`). Every
    method is one round trip or a pipeline."""

    def __init__(
        self,
        redis: Redis,
        keys: Keys,
        group: str = "engine",
        archive: ArchiveReader | None = None,
        replicas: int = 0,
        replica_timeout_ms: int = 1000,
    ) -> None:
        super().__init__(redis, keys, archive)
        self.group = group
        self.replicas = replicas
        self.replica_timeout_ms = replica_timeout_ms
        self._keys_of: dict[str, tuple[tuple[str, ...], tuple[str, str, str, str]]] = {}

    # --- writing -------------------------------------------------------------------------

    def _call_args(self, appends: Sequence[Append]) -> tuple[list[str], list[Any]]:
        """The keys and arguments of one script call appending ``appends`` (see the script:
        each append names only the keys it writes, and events without a secret come as
        their public JSON alone: hiredis packs each argument with a ``sprintf`` of its own,
        and Redis parses each)."""
        keys: list[str] = []
        args: list[Any] = [len(appends), self.group, RESULT_TTL_S, repr(wake_horizon(time()))]
        answered_here = not self.replicas
        keys_of = self._keys_of
        dues: dict[float, str] = {}
        for a in appends:
            game_id = a.game_id
            found = keys_of.get(game_id)
            if found is None:
                found = self._append_keys(game_id)
            always, (snapshot_key, games, archived, results) = found
            command_id, events, decisions, snapshot = (
                a.command_id,
                a.events,
                a.decisions,
                a.snapshot,
            )
            keys += always
            result = ""
            game_json = id_json(game_id)
            key = a.key or (command_key(a.seat, command_id) if command_id else "")
            if key and answered_here and a.answered:
                result = self._result_json(a, game_json)
                keys.append(f"{results}/{key}")  # Keys.result's name
            if snapshot:
                keys.append(snapshot_key)
            if not a.expected:
                keys += (games, archived)
            n = len(events)
            secrets = any(map(_secret, events))
            count = 4 + (2 * n if secrets else n) + 4 * len(decisions)  # its arguments
            over = "-" if a.over is None else "1" if a.over else "0"
            entry = a.entry[1] if a.entry and not a.held else ""
            args += (
                # Its numbers, entry id and game's JSON in one argument (each argument costs
                # a packing of its own here and a parse in Redis): argument count, expected
                # version, over, event count (negative: the public JSON alone of each),
                # entry id, and last the game's JSON (the deadlines' members are made of it).
                f"{count} {a.expected} {over} {n if secrets else -n} {entry} {game_json}",
                key,
                game_id,
                result,
                snapshot,
            )
            if secrets:
                args += chain.from_iterable(events)  # (public, secret) pairs
            else:
                args += map(_public, events)
            for seat, due, request, view in decisions:
                when = dues.get(due)  # a batch's requests share a few deadlines
                if when is None:
                    when = dues[due] = repr(due)
                args += (seat, when, request, view)
        return keys, args

    def _append_keys(self, game_id: str) -> tuple[tuple[str, ...], tuple[str, str, str, str]]:
        """:func:`_append_keys` of the store's keys, kept by game id (a dictionary's lookup
        of a string: the cache of the function hashes ``Keys``, a dataclass whose
        ``__hash__`` is Python's, on every call); all dropped past 65,536 games."""
        keys_of = self._keys_of
        if len(keys_of) >= APPEND_KEYS_KEPT:
            keys_of.clear()
        found = keys_of[game_id] = _append_keys(self.keys, game_id)
        return found

    @staticmethod
    def _result_json(a: Append, game_json: str | None = None) -> str:
        """A :class:`CommandResult` "accepted" as its JSON (the model's keys in its order),
        written without building the model (once per command the engine appends);
        ``game_json``: the game's id as JSON, if the caller has it."""
        seat = "null" if a.seat is None else a.seat
        game = id_json(a.game_id) if game_json is None else game_json
        return (
            f'{{"command_id":{string_json(a.command_id)},"game_id":{game},'
            f'"status":"accepted","seat":{seat},"version":{a.version},"code":null,'
            '"reason":null}'
        )

    async def append(self, a: Append) -> AppendResult:
        """Append one command's events atomically (see the module docstring); a transient
        failure is raised, as any other."""
        result = (await self.append_many([a]))[0]
        if result.error is not None:
            raise result.error
        return result

    async def append_many(self, appends: Sequence[Append]) -> list[AppendResult]:
        """Appends executed in order, in one script call per partition on a cluster (their
        keys share its slot) and one in all on one Redis: one round trip for a whole batch,
        with one reply to parse instead of one per command."""
        if not appends:
            return []
        groups = self._groups(appends)
        async with Batch(self.redis) as batch:
            calls = [
                batch.call(SCRIPTS["append"], *self._call_args([appends[i] for i in g]))
                for g in groups
            ]
            if self.replicas:
                batch.wait(self.replicas, self.replica_timeout_ms)
            raw = await batch.execute(raise_on_error=False)
            if len(groups) == 1 and not self.replicas and not isinstance(raw[0], Exception):
                return _results(raw[0])  # one call's reply, every append's (one Redis)
            by_append: dict[int, tuple[AppendResult, int]] = {}
            for group, position in zip(groups, calls, strict=True):
                reply = raw[position]
                for j, i in enumerate(group):
                    by_append[i] = (_result(appends[i], reply, j), position)
            results = [by_append[i][0] for i in range(len(appends))]
            if not self.replicas:
                return results
            replicated = [
                batch.replicated(raw, by_append[i][1]) >= self.replicas for i in range(len(appends))
            ]
        await self._answer(
            [
                a
                for a, r, ok in zip(appends, results, replicated, strict=True)
                if ok and r.status == "ok"
            ]
        )
        return [
            r if ok or r.status != "ok" else AppendResult(r.status, r.version, answered=False)
            for r, ok in zip(results, replicated, strict=True)
        ]

    def _groups(self, appends: Sequence[Append]) -> list[list[int]]:
        """The appends' positions by script call: all in one on one Redis, by partition on
        a cluster (a call's keys must share a slot); each group in the batch's order."""
        if not is_cluster(self.redis):
            return [list(range(len(appends)))]
        by_partition: dict[int, list[int]] = {}
        for i, a in enumerate(appends):
            by_partition.setdefault(self.keys.partition(a.game_id), []).append(i)
        return list(by_partition.values())

    async def _answer(self, appends: Sequence[Append]) -> None:
        """Store the senders' results of replicated appends (one round trip), each unless
        its command has an answer already (the script's ``answer``: one answer a command)."""
        answered = [a for a in appends if a.command_id and a.answered]
        if not answered:
            return
        async with Batch(self.redis) as batch:
            for a in answered:
                key = self.keys.result(a.game_id, a.seat, a.command_id)
                batch.call(SCRIPTS["answer"], [key], [self._result_json(a), RESULT_TTL_S])
            await batch.execute()

    async def finish(
        self,
        game_id: str | None,
        partition: int,
        result: CommandResult | None,
        entry_id: str | None,
        rejection: str | None = None,
        version: int | None = None,
    ) -> bool:
        """Record the outcome of a command that appended nothing, and acknowledge it; False
        (nothing done) if the game's log is behind ``version``, the one it was decided at."""
        k = self.keys
        # Without a result to store, any key of the partition's slot stands in for it.
        result_key, result_json = k.rejections(partition), ""
        if result is not None and game_id is not None:
            result_key = k.result(game_id, result.seat, result.command_id)
            result_json = result.model_dump_json()
        meta, decided_at = k.rejections(partition), ""  # a key of the slot: nothing checked
        if version is not None and game_id is not None:  # a game of the partition was read
            meta, decided_at = k.meta(game_id), str(version)
        keys = [result_key, k.commands(partition), k.rejections(partition), meta]
        keys.append(k.archived(partition))
        args: list[Any] = [
            result_json,
            RESULT_TTL_S,
            self.group,
            entry_id or "",
            rejection or "",
            decided_at,
            game_id or "",
        ]
        return bool(await call(self.redis, SCRIPTS["finish"], keys, args))

    async def save_snapshots(self, snapshots: Sequence[tuple[str, int, dict[str, Any]]]) -> None:
        """Store (game, version, state) snapshots in one round trip; each only if its game's
        log has reached its version (see the script: a log that went back keeps none)."""
        async with Batch(self.redis) as batch:
            for game_id, version, snapshot in snapshots:
                data = dump_json(snapshot)
                keys = [self.keys.snapshot(game_id), self.keys.meta(game_id)]
                batch.call(SCRIPTS["snapshot"], keys, [version, data])
            await batch.execute()

    async def record_final_hash(
        self, game_id: str, state_hash: str, version: int, entries: Sequence[str] = ()
    ) -> None:
        """The hash of a finished game's final state at ``version``, to check replays
        against; the game joins its partition's finished games, with when it finished (for
        archiving), and the command ``entries`` held for its end (:attr:`Append.held`) are
        acknowledged with it. Nothing is recorded (or acknowledged) if the log has not
        reached ``version`` (it went back: the game is not over)."""
        await self._record_finished(game_id, state_hash, version, entries)

    async def stamp_finished(self, game_ids: Sequence[str]) -> None:
        """Record when finished games finished, for those that have no such record (they
        finished before it was kept): archiving counts its grace period from now."""
        for game_id in game_ids:
            await self._record_finished(game_id, "", 0)

    async def _record_finished(
        self, game_id: str, state_hash: str, version: int, entries: Sequence[str] = ()
    ) -> None:
        k = self.keys
        p = k.partition(game_id)
        keys = [k.meta(game_id), k.finished(p), k.events(p), k.commands(p)]
        args = [game_id, state_hash, version, self.group, *entries]
        await call(self.redis, SCRIPTS["finished"], keys, args)

    async def forget(self, game_id: str, version: int, final_hash: str) -> bool:
        """Delete an archived game from Redis (its log, meta, seen ids, snapshot, seats and
        views), unless it has changed since it was read for the archive; its id moves to the
        partition's archived games. Only once the archive is written and verified."""
        k = self.keys
        p = k.partition(game_id)
        keys = [
            k.meta(game_id),
            k.log(game_id),
            k.seen(game_id),
            k.snapshot(game_id),
            k.seats(game_id),
            k.view(game_id),
            k.games(p),
            k.finished(p),
            k.archived(p),
        ]
        return bool(await call(self.redis, SCRIPTS["forget"], keys, [game_id, version, final_hash]))
