"""The bot player: answers decision requests for bot seats, and for humans out of time.

It follows the partitions' bot decision streams (``Keys.bot_decisions``: the engine's
append puts there the requests of bot seats and leavers' seats, and starts human seats'
clocks among the deadlines itself) through its own consumer group (several workers share
the load), one FastStream batch subscriber per partition stream
(``shared.bus.GroupConsumer``); a separate loop plays for humans whose deadline passed,
and for the requests that could not be answered when they came (their view lagged): those
are kept among the deadlines too, so a request dead-lettered meanwhile is still answered.
For a bot seat it decides at once; for a seat whose player left, or whose
deadline passed without a move, a fallback bot decides and the command is recorded with
actor ``fallback``. It knows no game: the seat's projected view names it, and the bots play
it through the registry.

A bot sees only its seat's own view, never the game state, and answers with one of the
legal commands the request carries. A bot seat's request carries that view (the engine
makes it from the state it holds at the request's version): the bot decides from the
request alone, and its command is sent only if the game is still at that version (in the
send's round trip: a stale request's answer never reaches the game). A request without a
view (a deadline entry, a seat whose player left after the engine loaded the game, an
engine not yet upgraded) is answered from the seat's projected view, which must show the
request's version: the player reads it, and while the projection is behind, blocks on the
partition's view-update stream (the projector adds an entry after each view it writes)
until its game is named, instead of polling. Command ids are derived from (game, version,
seat), so a redelivered request, or two workers answering one, apply a move once.

A searching bot thinks for its budget (``bot_think_ms``) but never past the request's
deadline: it gets the time left less a safety margin, and answers with the best move found
by then. Searches run in threads, so one worker keeps serving other games meanwhile.
"""

from __future__ import annotations

import asyncio
import functools
import hmac
import random
import time
import uuid
from collections.abc import Sequence
from typing import Any

import structlog
from prometheus_client import Counter, Histogram
from redis.asyncio import Redis

from services.runtime import Stopped, wait_for
from shared.bus import Broker, CommandSender, Delivery, GroupConsumer, Keys
from shared.bus.deadlines import LONGEST_WAIT_S, Wakes, hand_over, set_and_ack
from shared.bus.deadlines import heads as deadline_heads
from shared.bus.faults import transient
from shared.contracts import (
    CommandEnvelope,
    DecisionRequest,
    dump_json,
    load_json,
    read_decision_request,
)
from shared.contracts.records import HUMAN, LEFT
from shared.eventstore import EventReader
from shared.games import api
from shared.games.api import AnyGame, Observation
from shared.loops import keep_running
from shared.observability import bound, metrics
from shared.redis_replies import text as _text
from shared.settings import Settings
from shared.views import ViewWaiter

from .bots import Bot, bot, game_of
from .seats import SeatBook, bot_level

log = structlog.get_logger("caravel.ai")

GROUP = "ai"
BATCH = 200
SAFETY_S = 0.1  # answer this long before a deadline: time to send, and one last iteration
VIEW_WAIT_S = 2.0  # a view this late leaves its request pending, to be tried again
RETRY_S = 1.0  # a request not answered yet is tried again from the deadlines this much later
WAIT_MS = 100  # the deadlines are read again at least this often without wake-ups (Wakes)
# and with them (a wake-up lost to a reconnection is made good by then; the engine publishes
# none for a deadline due later than a read to come: ``shared.bus.deadlines.wake_horizon``)
IDLE_WAIT_MS = round(1000 * LONGEST_WAIT_S)
KEPT_S = 0.25  # deadlines whose write failed (their shard away) are written again this often
DUE_PER_ROUND = 100  # due deadlines played per partition and round
FOLLOW_S = 1.0  # how often the seat changes of partitions not followed yet (shard away) are tried


Answers = dict[tuple[str, int], tuple[CommandEnvelope, int]]
"""Commands decided from requests' own views, by (game, seat), with the version each was
decided at: sent together by :meth:`BotPlayer.handle`."""


class Unread:
    """A seat's player not read yet (``None`` is a reading: no lobby seated anyone)."""


UNREAD = Unread()


class BotPlayer:
    def __init__(
        self, redis: Redis, keys: Keys, settings: Settings, consumer: str | None = None
    ) -> None:
        self.redis = redis
        self.keys = keys
        self.settings = settings
        self.broker = Broker(redis, readers=keys.partitions, service="ai")
        self.sender = CommandSender(redis, keys, self.broker)  # answers published through it
        self.consumer = GroupConsumer(
            self.broker,
            redis,
            GROUP,
            consumer or f"ai-{uuid.uuid4().hex[:8]}",
            keys,
            self.handle,
            batch=BATCH,
            max_deliveries=settings.max_deliveries,
            dead_after_ms=settings.dead_letter_after_ms,
            claim_idle_ms=settings.claim_idle_ms,
            linger_ms=settings.bot_linger_ms,
            linger_from=1,
        )
        self.streams = [keys.bot_decisions(p) for p in keys.all_partitions()]
        self.views = ViewWaiter(redis, keys, service="ai")
        self.seats = SeatBook(redis, keys)
        self.logs = EventReader(redis, keys)  # the games' versions: stale deadlines
        self.rng = random.Random()
        self.key = settings.signing_key()
        self._failing: set[str] = set()  # the deadlines whose shard failed last round
        self._kept: dict[str, float] = {}  # deadlines not written yet (:meth:`_remind_or_keep`)
        self._kept_at = 0.0  # when they are next written
        self._deadline_keys = [keys.deadlines(p) for p in keys.all_partitions()]
        self._firing: dict[str, asyncio.Task[None]] = {}  # deadlines being played, by key
        self.wakes = Wakes(redis, self._deadline_keys)  # an earlier deadline written: read
        self._follow_at = 0.0  # when the seat changes not followed yet are tried again
        # the decisions streams whose requests of before are still to move to the bots' own
        self._handing_over = [
            (keys.decisions(p), keys.bot_decisions(p)) for p in keys.all_partitions()
        ]

    async def start(self, stop: asyncio.Event | None = None) -> None:
        """Start reading, the whole start waited for while Redis fails (away, or a
        subscriber's first read not answered in time), a failed attempt taken back
        (:meth:`close`) so that the next one starts afresh (issue 25). Only the seat
        changes' follow was waited for before, and a retried follow left the subscriber of
        the attempt that timed out reading beside the new one."""
        await wait_for("Redis", self._begin, stop or asyncio.Event(), undo=self.close)

    async def _begin(self) -> None:
        """Follow the seat changes (before any request is answered; the partitions whose
        shard fails are followed later, :meth:`follow_seat_changes`), take over the requests
        left on the decisions streams, and subscribe to every partition's bot decision
        stream (groups made from their start; a partition whose shard fails is revived
        later by the consumer's rounds)."""
        await self.broker.start()
        self.wakes.start()
        await self.follow_seat_changes()
        await self.take_over_requests()
        for stream in self.streams:
            await self.consumer.subscribe(stream)

    async def follow_seat_changes(self) -> None:
        """Follow the partitions' seat changes not followed yet (their shard failed at the
        last try): at the start, then at most every :data:`FOLLOW_S` from the deadlines
        loop. Raises only when no partition answers (Redis away: the start is retried)."""
        self._follow_at = time.monotonic() + FOLLOW_S
        failed = await self.seats.follow(self.broker)
        if failed:
            log.warning(
                "seat changes not followed yet", partitions=len(failed), error=repr(failed[0])
            )

    async def take_over_requests(self) -> None:
        """The requests this player's group had not answered on the decisions streams, which
        it read before the engine wrote bots' requests to streams of their own, moved to
        those (once: the group is removed from the decisions streams, so that it no longer
        holds their entries from being trimmed). A partition whose shard refuses (or a
        Redis away) is tried again at the next deadlines round: the start goes on."""
        try:
            moved, self._handing_over = await hand_over(self.redis, GROUP, "r", self._handing_over)
        except Exception as e:
            log.warning("decision requests not taken over yet", error=repr(e))
            return
        if moved:
            log.info("decision requests taken over", requests=moved)
        if self._handing_over:
            log.warning("decision requests not taken over yet", partitions=len(self._handing_over))

    async def run(self, stop: asyncio.Event) -> None:
        """Answer until ``stop``: the subscribers answer requests as they come; every
        ``CARAVEL_CLAIM_IDLE_MS`` / 2 the requests another worker left pending that long
        (it died, or could not answer yet) are taken over; and the deadlines loop plays for
        the humans whose time ran out."""
        try:
            await self.start(stop)
        except Stopped:
            return
        deadlines = asyncio.create_task(
            keep_running(stop, self.serve_round, log, "bot player deadlines round failed")
        )
        try:
            await self.consumer.run(stop)
        finally:
            self.wakes.wake()  # the deadlines loop's wait ends: it sees the stop
            await deadlines
            await self.close()

    async def close(self) -> None:
        """Stop playing deadlines, and reading (the decision requests, the seat changes and
        view updates): at a stop, and after a start that failed part way."""
        for task in list(self._firing.values()):
            task.cancel()
        await asyncio.gather(*self._firing.values(), return_exceptions=True)
        try:
            await self.wakes.close()
            await self.consumer.close()
            await self.views.close()
            await self.seats.close()
        finally:
            await self.broker.stop()

    async def serve_round(self) -> None:
        """Play for the humans whose time ran out, then wait for the next deadline, or a
        wake-up (:class:`Wakes`: a deadline written earlier, a partition's due ones played)."""
        if self._handing_over:
            await self.take_over_requests()
        if not self.seats.following and time.monotonic() >= self._follow_at:
            await self.follow_seat_changes()
        if self._kept and time.monotonic() >= self._kept_at:
            await self._remind_or_keep({})
        self.wakes.clear()
        await self.wakes.wait(await self.fire_deadlines() / 1000)

    def _longest_wait_ms(self) -> int:
        """How long the deadlines loop may sleep when no deadline is nearer: long while
        every earlier deadline written wakes it, short while something is to be tried
        again at the next round (a subscription, a partition's read, a hand-over, a
        follow, deadlines kept)."""
        if (
            not self.wakes.listening
            or self._failing
            or self._handing_over
            or self._kept
            or not self.seats.following
        ):
            return WAIT_MS
        return IDLE_WAIT_MS

    async def handle(self, deliveries: Sequence[Delivery]) -> None:
        """Answer the newest request of each seat; acknowledge the requests of the seats
        answered (a seat's older requests are stale). The others stay pending: another
        worker (or this one) reclaims them and tries again. The batch's seats are read in
        one round trip; the instant bots' commands sent in one (:meth:`_send`); the
        requests to try again are written in another (rare), and its humans' clocks with
        the acknowledgement in one more (``shared.bus.deadlines``)."""
        parsed = [(d, read_decision_request(d.fields[b"r"])) for d in deliveries]
        latest: dict[tuple[str, int], DecisionRequest] = {}
        for _, request in parsed:
            key = (request.game_id, request.seat)
            if key not in latest or latest[key].version < request.version:
                latest[key] = request
        players = await self.seats.players(latest)
        clocks: dict[str, float] = {}  # humans' deadline members: when their time runs out
        answers: Answers = {}  # the bots' commands decided from their requests' views
        outcomes = await asyncio.gather(
            *(self.consider(r, players[k], clocks, answers) for k, r in latest.items()),
            return_exceptions=True,
        )
        sent = await self._send(answers)
        outcomes = [sent.get(key, outcome) for key, outcome in zip(latest, outcomes, strict=True)]
        done: set[tuple[str, int]] = set()
        later: dict[str, float] = {}  # deadline members: when to try again
        for (key, request), outcome in zip(latest.items(), outcomes, strict=True):
            if isinstance(outcome, BaseException):
                log.error("decision failed", game=key[0], seat=key[1], exc_info=outcome)
                later[_member(request)] = _retry_at(request, players[key], outcome)
            elif outcome:
                done.add(key)
            else:  # a bot's (or a leaver's) view lags: try again soon
                later[_member(request)] = time.time() + RETRY_S
        await self._remind_or_keep(later)
        await self._clocks_and_ack(
            clocks, [(d, r) for d, r in parsed if (r.game_id, r.seat) in done]
        )

    async def _send(self, answers: Answers) -> dict[tuple[str, int], bool | BaseException]:
        """Send the commands decided from requests' own views, in one round trip for the
        batch (:meth:`CommandSender.send_many_at`): each seat's outcome, True once its
        command is sent or its game has moved on, False when the game's log is behind the
        request (a failover took it back: tried again), the error when its call failed."""
        if not answers:
            return {}
        try:
            replies = await self.sender.send_many_at(list(answers.values()))
        except Exception as e:  # the round trip failed: every request is tried again
            return dict.fromkeys(answers, e)
        return {
            key: reply if isinstance(reply, Exception) else reply >= version
            for (key, (_, version)), reply in zip(answers.items(), replies, strict=True)
        }

    async def _clocks_and_ack(
        self, clocks: dict[str, float], done: list[tuple[Delivery, DecisionRequest]]
    ) -> None:
        """Start the humans' clocks and acknowledge the requests answered, in one round trip
        (each partition's clocks set before its entries are acknowledged, atomically)."""
        by_partition: dict[int, tuple[dict[str, float], list[str], str]] = {}
        for member, due in clocks.items():
            p = self.keys.partition(load_json(member)[0])
            by_partition.setdefault(p, ({}, [], self.keys.bot_decisions(p)))[0][member] = due
        for d, request in done:
            p = self.keys.partition(request.game_id)
            by_partition.setdefault(p, ({}, [], d.stream))[1].append(d.id)
        await set_and_ack(
            self.redis,
            GROUP,
            [
                (self._deadline_keys[p], m, stream, ids)
                for p, (m, ids, stream) in by_partition.items()
            ],
        )
        if clocks:
            self.wakes.wake()

    async def remind(self, due: dict[str, float], clocks: dict[str, float] | None = None) -> None:
        """Put requests not answered yet among their partition's deadlines, each due at the
        time given (unless there already): the deadlines loop plays them then, whatever
        becomes of their stream entries. A request delivered too often is dead-lettered,
        and a bot seat, which has no clock of its own, waited for good (issue 25: 30 bot
        games stuck after the views projection was away). ``clocks``: humans' deadlines,
        set as given, in the same round trip."""
        if not due and not clocks:
            return
        async with self.redis.pipeline(transaction=False) as pipe:
            for key, members in self._by_partition(due).items():
                pipe.zadd(key, members, nx=True)
            for key, members in self._by_partition(clocks or {}).items():
                pipe.zadd(key, members)
            await pipe.execute()
        self.wakes.wake()

    async def _remind_or_keep(self, due: dict[str, float]) -> None:
        """:meth:`remind`; if its shard fails (away, or refusing writes: the shard that
        just failed these requests' commands), the deadlines are kept here and written by
        the deadlines loop every :data:`KEPT_S` until it takes them. Raising left the
        batch pending for a reclaim, ``claim_idle_ms`` (10 s) later: a bot game whose
        request was read just before its master's kill stood still 10 to 15 s after the
        failover (issue 25). Kept in memory only: if this process dies, its requests are
        still pending, and reclaimed by another."""
        written = {**self._kept, **due}
        try:
            await self.remind(written)
        except Exception as e:
            if not transient(e):
                raise
            if not self._kept:
                log.warning("deadlines not written yet", members=len(due), error=repr(e))
            self._kept.update(due)
            self._kept_at = time.monotonic() + KEPT_S
            return
        for member in written:  # not those kept by a batch that failed meanwhile
            self._kept.pop(member, None)

    def _by_partition(self, members: dict[str, float]) -> dict[str, dict[str, float]]:
        """Deadline members (``[game, version, seat]``) by their partition's deadlines."""
        out: dict[str, dict[str, float]] = {}
        for member, due in members.items():
            key = self.keys.deadlines(self.keys.partition(load_json(member)[0]))
            out.setdefault(key, {})[member] = due
        return out

    async def consider(
        self,
        request: DecisionRequest,
        who: str | Unread | None = UNREAD,
        clocks: dict[str, float] | None = None,
        answers: Answers | None = None,
    ) -> bool:
        """Answer for a bot seat or a seat whose player left, or start a human's clock (in
        ``clocks``, for the caller to write; else at once); False when the answer has to
        wait (the seat's view is not there yet). ``who``: the seat's player, if read.
        ``answers``: where a command decided from the request's own view goes, for the
        caller to send (else it is sent at once)."""
        if isinstance(who, Unread):
            who = (await self.seats.players([(request.game_id, request.seat)]))[
                (request.game_id, request.seat)
            ]
        level = bot_level(who)  # who None: no lobby seated anyone, no clock runs
        turn = (request.game_id, request.version, request.seat)
        legal, own = request.legal_commands, request.view
        if level is not None:
            deadline = request.deadline.timestamp()
            return await self.play(*turn, level, "bot", deadline, legal, own, answers)
        if who == LEFT:
            return await self.play(*turn, None, "fallback", None, legal, own, answers)
        if who == HUMAN:  # the engine set the deadline: the table's, else the default
            due = {_member(request): request.deadline.timestamp()}
            if clocks is None:
                await self.remind({}, due)
            else:
                clocks.update(due)
        return True

    async def fire_deadlines(self) -> int:
        """Play for humans whose time ran out, and for bot seats whose request could not be
        answered when it came (:meth:`remind`); returns how long to wait (ms) for the next
        deadline, :meth:`_longest_wait_ms` at most. Each partition's deadlines are read in one round
        trip for all (one script call on one Redis, a pipeline per shard on a cluster:
        ``shared.bus.deadlines``), and its due ones played by a task of their own
        (the next round skips a partition whose task still runs): a shard away, refusing
        writes, or whose views lag holds up its own partitions only."""
        keys = self._deadline_keys
        *heads, legacy = await deadline_heads(
            self.redis, [*keys, self.keys.legacy_deadlines()], DUE_PER_ROUND
        )
        await self._move_legacy(legacy)
        now = time.time()
        failing = {key for key, head in zip(keys, heads, strict=True) if _failed(head)}
        if failing != self._failing:
            log.warning("deadlines not read", partitions=len(failing), keys=sorted(failing)[:8])
            self._failing = failing
        nearest = {k: h[0][1] for k, h in zip(keys, heads, strict=True) if h and not _failed(h)}
        for key, at in nearest.items():
            if at <= now and key not in self._firing:
                self._firing[key] = task = asyncio.create_task(self._fire(key))
                task.add_done_callback(functools.partial(self._fired, key))
        later = [at for at in nearest.values() if at > now]
        longest = self._longest_wait_ms()
        if not later:
            return longest
        return int(min(longest, max(1, (min(later) - time.time()) * 1000)))

    async def _fire(self, key: str) -> None:
        """Play the due entries of one partition's deadlines (see :meth:`fire_deadlines`).
        An entry is first made due ``RETRY_S`` later (which other workers see: they leave
        it), and removed once played: one not answered yet, or whose command or removal
        failed (its shard refusing writes), is played again then. (Removed first, it was
        lost when the command was refused: issue 25, games stuck after a replica's kill.)
        Two workers playing one entry send one command id: it counts once. The entry names
        the request's game, version and seat; the view at that version carries its legal
        commands."""
        due: Any = await self.redis.zrangebyscore(key, "-inf", time.time(), 0, DUE_PER_ROUND)
        for member in await self._drop_stale(key, due):
            later = {member: time.time() + RETRY_S}
            if not await self.redis.zadd(key, later, xx=True, gt=True, ch=True):
                continue  # gone meanwhile: another worker played it
            game_id, version, seat = load_json(member)
            who = (await self.seats.players([(game_id, seat)]))[(game_id, seat)]
            level = bot_level(who)  # a bot seat's request plays as that bot
            actor = "fallback" if level is None else "bot"
            if await self.play(game_id, version, seat, level, actor):
                await self.redis.zrem(key, member)

    async def _drop_stale(self, key: str, due: list[Any]) -> list[Any]:
        """The due entries whose game is still at their version; the others (a human moved
        in time: the clock of every move a human makes in time is one) are removed, in one
        round trip for all after one for their games' versions. Each was played alone
        before, three round trips and a view made (asked of the views projection) only to
        find it stale."""
        turns = [(member, load_json(member)) for member in due]
        versions = await self.logs.versions(sorted({turn[0] for _, turn in turns}))
        stale = [member for member, turn in turns if versions[turn[0]] > turn[1]]
        if stale:
            await self.redis.zrem(key, *stale)
        return [member for member, turn in turns if versions[turn[0]] <= turn[1]]

    def _fired(self, key: str, task: asyncio.Task[None]) -> None:
        """A partition's due deadlines played (:meth:`_fire`): its next ones may start."""
        self._firing.pop(key, None)
        self.wakes.wake()  # its next deadlines are read at once
        if not task.cancelled() and task.exception() is not None:
            log.warning("deadlines not played", key=key, error=repr(task.exception()))

    async def _move_legacy(self, entries: Any) -> None:
        """Move entries of the deadlines kept before they were per partition
        (:meth:`Keys.legacy_deadlines`) to their partitions' (a fault there is logged: the
        partitions' own deadlines were read all the same)."""
        if _failed(entries) or not entries:
            return
        try:
            await self.remind({_text(m): score for m, score in entries})
            await self.redis.zrem(self.keys.legacy_deadlines(), *(m for m, _ in entries))
        except Exception as e:
            log.warning("legacy deadlines not moved", error=repr(e))

    async def play(
        self,
        game_id: str,
        version: int,
        seat: int,
        level: str | None,
        actor: str,
        deadline: float | None = None,
        legal: list[dict[str, Any]] | None = None,
        own: Observation | None = None,
        answers: Answers | None = None,
    ) -> bool:
        """Decide for ``seat`` at ``version`` from its view, unless the game has moved on;
        ``level`` None: the game's fallback level. Choose among ``legal``, the commands the
        request carried (None: the view's, for a deadline entry). Answer before ``deadline``
        (a Unix time) when one is given. ``own``: the seat's view the request carried (its
        legal commands apart), or for a greedy seat the part of it the policy reads
        (``"part": "policy"``, which no other level decides from); without one, the seat's
        projected view is read. A command
        decided from ``own`` by an instant bot goes to ``answers`` when given (its caller
        sends a batch's together, :meth:`_send`: True here means decided, not yet sent; a
        searching bot's is sent at once, not held for the batch's other searches). False when
        nothing was decided and the request is to be tried again: the projected view has
        not reached ``version`` yet, or the game's log is behind it (a failover took it
        back)."""
        command_id = bot_command_id(self.key, game_id, version, seat)
        with bound(game=game_id, command=command_id, seat=seat):  # on every line
            if (
                own is not None
                and own.get("part") == api.POLICY_VIEW
                and (level or fallback_level(game_of(own))) != "greedy"
            ):
                own = None  # the greedy policy's part of the view: any other bot reads it all
            if own is None:
                view = await self._view_at(game_id, seat, version)
                if view is None:
                    return False
                legal = view["legal_commands"] if legal is None else legal
                if view["version"] != version or not legal:
                    return True  # stale: someone moved already, or nothing to decide
                observation = {**view, "legal_commands": legal}
            elif not legal:
                return True  # the seat has nothing to decide
            else:
                observation = {**own, "legal_commands": legal, "version": version}
            game = game_of(observation)
            level = level or fallback_level(game)
            budget = self.settings.bot_think_ms / 1000
            if deadline is not None:
                budget = max(0.0, min(budget, deadline - time.time() - SAFETY_S))
            player = bot(level)
            # A search thinks in a thread: a generator of its own. An instant bot decides
            # here, on the loop: the player's own (a new one's seeding, a few µs a bot move).
            rng = random.Random(self.rng.getrandbits(64)) if player.searches else self.rng
            started = time.perf_counter()
            choice = await _decided(player, observation, rng, budget)
            took, counted = _decision_metrics(level, actor, game.name)
            took.observe(time.perf_counter() - started)
            counted.inc()
            payload = {k: v for k, v in choice.items() if k not in ("type", "seat")}
            command = CommandEnvelope(
                command_id=command_id,
                game_id=game_id,
                seat=seat,
                type=choice["type"],
                payload=payload,
                actor="bot" if actor == "bot" else "fallback",
            )
            if own is None:  # the projected view's version said the game is still there
                await self.sender.send(command)
                return True
            # Sent only if the game is still at ``version`` (a stale request's answer is
            # not); above it the game moved on: done.
            if answers is not None and not player.searches:  # a search's goes at once
                answers[(game_id, seat)] = (command, version)
                return True
            return await self.sender.send_at(command, version) >= version

    async def _view_at(self, game_id: str, seat: int, version: int) -> Observation | None:
        """The seat's view once the projection has reached ``version`` (None after
        ``VIEW_WAIT_S``)."""
        view = await self.views.read_at(game_id, seat, version, VIEW_WAIT_S)
        if view is None or view["version"] < version:
            log.warning("view lagging", game=game_id, version=version)
            return None
        return view


async def _decided(
    player: Bot, observation: Observation, rng: random.Random, budget_s: float
) -> dict[str, Any]:
    """The bot's choice: a searching bot's in a thread (the loop serves other games while it
    thinks, between its GIL slices), an instant one's (random, greedy: 0.1 ms on average,
    a few ms at worst) here. A thread for an instant bot cost a hand-over each way (a
    submit, a wake-up, a future's callback) and kept the loop waiting on the GIL all the
    same (issue 24: the capacity benchmark's bots, one decision per move)."""
    if player.searches:
        return await asyncio.to_thread(player.choose, observation, rng, budget_s)
    return player.choose(observation, rng, budget_s)


@functools.cache
def _decision_metrics(level: str, actor: str, game: str) -> tuple[Histogram, Counter]:
    """A bot decision's time and count, labelled: each label set looked up once (a
    ``labels()`` call takes a lock and builds its key, 1 µs each, twice a bot move). The
    metrics' children are never removed, so the ones kept here stay the registry's."""
    return (
        metrics.BOT_DECISION_SECONDS.labels(level, actor),
        metrics.BOT_DECISIONS.labels(game),
    )


def _failed(reply: Any) -> bool:
    """A reply of a pipeline run without raising that is its shard's fault."""
    return isinstance(reply, Exception)


def _retry_at(request: DecisionRequest, who: str | None, error: BaseException) -> float:
    """When a request whose answer failed is tried again: a bot's (or a leaver's) seat soon
    (``RETRY_S``) if Redis was away or busy (a failover, a pool with no connection free in a
    burst of 1,000 tables' starts), since it has no clock of its own and its request's
    deadline is the table's move time, a minute by default, for which its game stood still;
    any other failure (a bot's bug), and a human's seat, whose clock keeps running, at the
    request's deadline."""
    if transient(error) and (who == LEFT or bot_level(who) is not None):
        return min(request.deadline.timestamp(), time.time() + RETRY_S)
    return request.deadline.timestamp()


def _member(request: DecisionRequest) -> str:
    """A request's entry among the deadlines: its game, version and seat."""
    return dump_json([request.game_id, request.version, request.seat])


def bot_command_id(key: bytes, game_id: str, version: int, seat: int) -> str:
    """The id of a bot's command for ``seat`` at ``version``: the same on every retry and in
    every bot process sharing the deployment's secret ``key`` (a decision answered twice is
    one command), and one no player can compute, as it is signed with that secret. (A
    player who sent a move under the id the next bot would use, once they were a plain hash,
    froze the game; the engine now also scopes every id to its seat.)"""
    signing = _keyed(key).copy()
    signing.update(f"{game_id}:{version}:{seat}".encode())
    return signing.hexdigest()[:32]


@functools.lru_cache(maxsize=4)
def _keyed(key: bytes) -> hmac.HMAC:
    """An HMAC-SHA256 with ``key`` set up and nothing signed yet, copied for each id: the
    key's set-up (OpenSSL's digest fetched by name, the key padded and hashed twice) once
    per key, not per bot move (1.1 µs a copy against 2.3 for ``hmac.digest``, the one-shot)."""
    return hmac.new(key, digestmod="sha256")


def fallback_level(game: AnyGame) -> str:
    """The level that plays a seat whose player left or ran out of time: the game's greedy
    policy if it has one (instant, and as good as instant gets), else random."""
    return "greedy" if "greedy" in api.bot_levels(game) else "random"
