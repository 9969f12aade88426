"""The engine: the single writer of every game's event log.

Engine instances share the partitions through leases that expire. For each partition it
holds, an engine runs one FastStream subscriber on the partition's command stream (started
when the lease is won, after the partition's pending entries are handled; stopped when it
goes), which hands it the commands in order, in batches. It loads each game (cached state,
or snapshot + later events), runs ``decide`` and appends the events with the expected
version through the event store's atomic script, which also records the command as seen,
answers the sender and acknowledges the entry. A command id already applied yields no new
events; a stale version is a conflict, handled by reloading and deciding again (and so is a
command that appends nothing, decided on a cached state its log is behind: a failover took
the log's tail back). Entries
left pending by a dead engine are reclaimed; an entry that keeps crashing its handler ends
in the dead-letter stream (``shared.bus.GroupConsumer``).
"""

from __future__ import annotations

import asyncio
import json
import math
import time
import uuid
from collections import Counter, OrderedDict
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from typing import Any

import structlog
from pydantic import ValidationError
from redis.asyncio import Redis

from shared.bus import (
    BODY,
    Broker,
    Coalesced,
    Delivery,
    GroupConsumer,
    Keys,
    ensure_group,
    tracing,
)
from shared.bus.scripts import Batch, Library, call
from shared.contracts import (
    CommandEnvelope,
    CommandResult,
    Made,
    Rejection,
    Seats,
    dump_json,
    new_event_id,
)
from shared.eventstore import Append, AppendResult, Archive, EventStore, GameCodec
from shared.games import api
from shared.loops import keep_running
from shared.observability import metrics
from shared.settings import Settings

log = structlog.get_logger("caravel.engine")

GROUP = "engine"
CACHE_GAMES = 20_000
ROUND_S = 0.05  # how soon a partition won is followed (its lease loop runs apart)

_RENEW = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
"""
_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""
SCRIPTS = Library("leases", {"renew": _RENEW, "release": _RELEASE})


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

    @classmethod
    def of(
        cls, state: Any, version: int, seen: dict[str, int], deadline_s: float | None
    ) -> CachedGame:
        """A loaded game, its kind found from its state's type."""
        game = None if state is None else api.of(state)
        return cls(game, state, version, seen, False, deadline_s)


@dataclass
class Finish:
    """A command that appends nothing: rejected, or a duplicate of an applied one. Decided
    on the game's cached state at ``version`` (None: no game was read), it is recorded only
    if the log is not behind that version: a log a failover took back is reloaded first."""

    partition: int
    entry_id: str
    game_id: str | None
    result: CommandResult | None
    rejection: Rejection | None = None
    version: int | None = None


@lru_cache(maxsize=65536)
def _command_json(command: api.Command) -> str:
    return dump_json(command.to_dict())


def _decision_json(
    game_id: str, version: int, decision: api.Decision, deadline: str, legal: list[api.Command]
) -> str:
    """A :class:`DecisionRequest` as JSON, built by hand: the engine sends one after every
    batch for every game it touched, and commands repeat (their JSON is cached)."""
    head = dump_json(
        {
            "request_id": f"{game_id}:{version}:{decision.seat}",
            "game_id": game_id,
            "version": version,
            "seat": decision.seat,
            "kind": decision.kind,
            "deadline": deadline,
            "correlation_id": None,
        }
    )
    commands = ",".join(_command_json(c) for c in legal)
    return f'{head[:-1]},"legal_commands":[{commands}]}}'


class Reject(Exception):
    def __init__(self, code: str, reason: str) -> None:
        super().__init__(reason)
        self.code, self.reason = code, reason


class Engine:
    def __init__(
        self,
        redis: Redis,
        settings: Settings | None = None,
        keys: Keys | None = None,
        engine_id: str | None = None,
        archive: Archive | None = None,
    ) -> None:
        self.redis = redis
        self.settings = settings or Settings()
        s = self.settings
        self.keys = keys or Keys(s.key_prefix, s.partitions)
        self.id = engine_id or f"engine-{uuid.uuid4().hex[:8]}"
        # With the archive, a command to an archived game finds it (and is refused, the
        # game being over) instead of finding no game at all.
        self.store = EventStore(
            redis, self.keys, GROUP, archive, s.durability_replicas, s.durability_timeout_ms
        )
        self.broker = Broker(redis, readers=self.keys.partitions, service="engine")
        self.consumer = GroupConsumer(
            self.broker,
            redis,
            GROUP,
            self.id,
            self.keys,
            Coalesced(self._on_batch),  # the partitions' batches appended in one round trip
            batch=s.batch_size,
            max_deliveries=s.max_deliveries,
            claim_idle_ms=s.claim_idle_ms,
        )
        self.codec = GameCodec()
        self.games: OrderedDict[str, CachedGame] = OrderedDict()
        self.held: set[int] = set()
        self._live: list[str] = [self.id]  # the live engines, as last seen
        self.fresh: set[int] = set()  # partitions just acquired: reclaim their pending first
        self.stats: Counter[str] = Counter()
        self._next_reclaim = 0.0  # when idle pending entries are next taken over
        self._streams = {self.keys.commands(p): p for p in self.keys.all_partitions()}

    # --- life cycle ------------------------------------------------------------------------

    async def start(self) -> None:
        """Create the command streams' consumer group (from id 0) for every partition, and
        connect the broker (its subscribers come with the leases)."""
        for stream in self._streams:
            await ensure_group(self.redis, stream, GROUP)
        await self.broker.start()

    async def run(self, stop: asyncio.Event) -> None:
        """Serve until ``stop`` is set: leases, and the partitions' subscribers. A failed
        round (Redis away, say) is logged and retried after a backoff (``keep_running``),
        having dropped what the engine can no longer trust (:meth:`distrust`)."""
        await self.start()
        await self.rebalance()
        period = self.settings.lease_ttl_ms / 3000
        leases = asyncio.create_task(
            keep_running(stop, self.rebalance, log, "lease round failed", period_s=period)
        )
        try:
            await self.serve(stop)
        finally:
            leases.cancel()
            await asyncio.gather(leases, return_exceptions=True)
            try:
                await self.release_all()
            except Exception:  # stopping while Redis is away: the leases expire by themselves
                log.exception("could not release the leases", engine=self.id)

    async def serve(self, stop: asyncio.Event) -> None:
        """Follow the held partitions until ``stop`` (without taking leases: :meth:`run`
        does), then stop every subscriber and the broker."""
        try:
            await keep_running(
                stop,
                self.serve_round,
                log,
                "engine round failed",
                period_s=ROUND_S,
                on_error=self.distrust,
            )
        finally:
            await self.consumer.close()
            await self.broker.stop()

    async def serve_round(self) -> None:
        """Subscribe to the partitions won (their pending entries handled first), drop the
        ones lost, and take over idle pending entries when due."""
        await self.follow()
        now = time.monotonic()
        if now >= self._next_reclaim:
            await self.reclaim()
            self._next_reclaim = now + self.settings.claim_idle_ms / 2000

    def distrust(self) -> None:
        """After a failed round or batch: cached games may be behind their logs (another
        engine may have taken a partition over while this one could not renew its lease),
        and entries read but not handled sit in this consumer's pending list. Drop every
        cached game and handle every held partition's pending entries again first."""
        self.stats["round_errors"] += 1
        self.games.clear()
        self.fresh |= self.held

    def distrust_partition(self, p: int) -> None:
        """:meth:`distrust`, for partition ``p`` alone (a batch or a step of ``p``'s
        failed: the others' games are as good as before)."""
        self.stats["round_errors"] += 1
        self._forget_games(p)
        if p in self.held:
            self.fresh.add(p)

    async def follow(self) -> None:
        """Make the subscribers match the held partitions: a partition lost stops its
        subscriber; a fresh one has its pending entries handled (all of them: their
        consumer is gone or distrusted), then its subscriber reads on."""
        for stream in self.consumer.streams:
            if self._streams[stream] not in self.held:
                await self.consumer.unsubscribe(stream)
        for p in sorted(self.fresh):
            self.fresh.discard(p)  # a failure while reclaiming makes it fresh again
            stream = self.keys.commands(p)
            if p in self.held:
                async with self._alone(p):
                    await self.consumer.reclaim(stream, 0, self._holds(p))
                    if p in self.held:
                        await self.consumer.subscribe(stream)

    @asynccontextmanager
    async def _alone(self, p: int) -> AsyncIterator[None]:
        """A step of partition ``p`` whose failure (its shard refusing writes, say) is
        ``p``'s alone: logged, ``p``'s cached games dropped and its pending entries handled
        again first next round, while the other partitions go on."""
        try:
            yield
        except Exception:
            log.exception("partition round failed", partition=p)
            self.distrust_partition(p)

    def _holds(self, p: int) -> Callable[[], bool]:
        return lambda: p in self.held

    async def reclaim(self) -> None:
        """Take over entries idle in held partitions (their handler crashed). A partition
        whose lease goes meanwhile is left alone: its entries, which this engine no longer
        handles, would be claimed again and again until dead-lettered."""
        await self.consumer.revive()
        for p in sorted(self.held):
            idle = 0 if p in self.fresh else self.settings.claim_idle_ms
            self.fresh.discard(p)
            async with self._alone(p):
                await self.consumer.reclaim(self.keys.commands(p), idle, self._holds(p))

    async def _on_batch(self, deliveries: list[Delivery]) -> None:
        """A subscriber's batch: handled; a failure leaves it pending and is distrusted."""
        try:
            await self.handle(deliveries)
        except Exception:
            log.exception("engine batch failed; it stays pending and is reclaimed")
            for p in {self._streams[d.stream] for d in deliveries}:
                self.distrust_partition(p)

    # --- leases ----------------------------------------------------------------------------

    async def rebalance(self) -> None:
        """Heartbeat, renew held leases, then hold a fair share of the partitions."""
        ttl = self.settings.lease_ttl_ms
        now_ms = int(time.time() * 1000)
        engines = self.keys.engines()
        async with Batch(self.redis) as batch:
            batch.pipe.zadd(engines, {self.id: now_ms + ttl})
            batch.pipe.zremrangebyscore(engines, "-inf", now_ms)
            batch.pipe.zrange(engines, 0, -1)
            held = sorted(self.held)
            for p in held:
                batch.call(SCRIPTS["renew"], [self.keys.lease(p)], [self.id, ttl])
            replies = await batch.execute(raise_on_error=False)
        for p, renewed in zip(held, replies[3:], strict=True):
            if isinstance(renewed, Exception):  # its shard fails: the others carry on
                log.warning("lease not renewed", partition=p, error=repr(renewed))
            if not renewed or isinstance(renewed, Exception):
                self._drop(p)
        failed = next((r for r in replies[:3] if isinstance(r, Exception)), None)
        if failed is None:
            self._live = sorted(m.decode() if isinstance(m, bytes) else m for m in replies[2])
        else:  # the heartbeat's shard fails: share out as last seen, and carry on
            log.warning("engines' heartbeat not written", error=repr(failed))
        live = self._live
        total = self.keys.partitions
        share = math.ceil(total / max(len(live), 1))
        for p in sorted(self.held, reverse=True)[: max(0, len(self.held) - share)]:
            await self._release_lease(p)
            self._drop(p)
        need = share - len(self.held)
        if need <= 0:
            return
        start = (live.index(self.id) if self.id in live else 0) * share
        candidates = [(start + i) % total for i in range(total)]
        candidates = [p for p in candidates if p not in self.held]
        async with self.redis.pipeline(transaction=False) as pipe:
            for p in candidates:
                pipe.set(self.keys.lease(p), self.id, nx=True, px=ttl)
            taken = await pipe.execute(raise_on_error=False)  # a failing shard: none won there
            won = [p for p, ok in zip(candidates, taken, strict=True) if ok is True]
        for p in won[need:]:
            await self._release_lease(p)
        for p in won[:need]:
            self._forget_games(p)  # cached while it was not held, if ever: behind its log
            self.held.add(p)
            self.fresh.add(p)
        if won:
            log.info("leases", engine=self.id, held=len(self.held), live=len(live))

    def _drop(self, p: int) -> None:
        """The lease on ``p`` is gone: another engine writes its games from now on."""
        self.held.discard(p)
        self.fresh.discard(p)
        self._forget_games(p)

    def _forget_games(self, p: int) -> None:
        for game_id in [g for g in self.games if self.keys.partition(g) == p]:
            del self.games[game_id]

    async def _release_lease(self, p: int) -> None:
        await call(self.redis, SCRIPTS["release"], [self.keys.lease(p)], [self.id])

    async def release_all(self) -> None:
        for p in sorted(self.held):
            await self._release_lease(p)
            self._drop(p)
        await self.redis.zrem(self.keys.engines(), self.id)

    # --- commands --------------------------------------------------------------------------

    async def handle(self, deliveries: Sequence[Delivery], attempt: int = 0) -> None:
        """Decide every delivery in order, then write the whole batch in one round trip.

        Deliveries of partitions no longer held (the lease went while the batch was read)
        are left pending, neither handled nor acknowledged: the new owner reclaims them, and
        handling them here would cache games this engine no longer writes. So are those of
        a fresh partition (its subscriber read again after a failure before the partition's
        pending entries were handled): the reclaim that comes next handles them after the
        older ones, in order."""
        deliveries = [d for d in deliveries if self._current(self._streams[d.stream])]
        outcomes: list[tuple[Delivery, str | None, Append | Finish]] = []
        parsed = [(d, self._parse(d)) for d in deliveries]
        now = datetime.now(UTC).isoformat()
        await self._prefetch([env for _, env in parsed if isinstance(env, CommandEnvelope)])
        for d, env in parsed:
            if isinstance(env, Finish):
                outcomes.append((d, None, env))
                continue
            try:
                with tracing.command_span(env.game_id, env.command_id, env.type, env.seat):
                    game_id, outcome = await self._decide(d, env, now)
            except Exception:
                # A crash: leave the entry pending; it is reclaimed and retried, and after
                # too many deliveries it goes to the dead letters. The line names the command
                # (not bound to the context per command: that was 2% of the engine's CPU).
                log.exception(
                    "command crashed its handler",
                    entry=d.id,
                    stream=d.stream,
                    game=env.game_id,
                    command=env.command_id,
                    seat=env.seat,
                )
                self.stats["crashed"] += 1
                continue
            outcomes.append((d, game_id, outcome))

        appends = [o for _, _, o in outcomes if isinstance(o, Append)]
        self._attach(appends)
        started = time.perf_counter()
        results = await self.store.append_many(appends)
        if appends:
            metrics.APPEND_SECONDS.observe(time.perf_counter() - started)
        unanswered = sum(not r.answered for r in results)
        if unanswered:
            self.stats["unreplicated"] += unanswered
            log.warning("appends not on enough replicas in time: unanswered", count=unanswered)
        status = {id(a): r for a, r in zip(appends, results, strict=True)}
        outcomes = self._without_failed_shards(outcomes, status)
        failed: dict[str, int] = {}  # game -> position of its first failed append
        for i, (_, game_id, o) in enumerate(outcomes):
            if isinstance(o, Append) and status[id(o)].status != "ok" and game_id:
                failed.setdefault(game_id, i)
                self.games.pop(game_id, None)

        finishes: list[tuple[int, Delivery, Finish]] = []
        retry: list[tuple[int, Delivery]] = []
        accepted: list[Append] = []
        for i, (d, game_id, o) in enumerate(outcomes):
            if game_id in failed and i >= failed[game_id]:
                retry.append((i, d))  # decided on a stale state: decide again after reloading
            elif isinstance(o, Finish):
                finishes.append((i, d, o))
            elif isinstance(o, Append):
                accepted.append(o)
        self.stats["accepted"] += len(accepted)
        metrics.count_commands("accepted", n=len(accepted))
        self._count_by_game(accepted)
        retry += await self._finish(finishes)
        await self._final_hashes(appends, results)
        if retry:
            self.stats["conflicts"] += len(retry)
            if attempt < 3:
                await self.handle([d for _, d in sorted(retry, key=lambda r: r[0])], attempt + 1)
            else:
                log.warning("giving up on a batch for now", entries=len(retry))

    def _without_failed_shards(
        self,
        outcomes: list[tuple[Delivery, str | None, Append | Finish]],
        status: dict[int, AppendResult],
    ) -> list[tuple[Delivery, str | None, Append | Finish]]:
        """The outcomes of the partitions whose appends all went through. A partition whose
        shard refused one (NOREPLICAS, a failover) is left alone, its entries pending: they
        are handled again, in order, once its shard takes writes; the other partitions of
        the batch carry on."""
        down = {
            self._streams[d.stream]
            for d, _, o in outcomes
            if isinstance(o, Append) and status[id(o)].status == "failed"
        }
        if not down:
            return outcomes
        log.warning("appends refused by their shard: tried again later", partitions=sorted(down))
        for p in down:
            self.distrust_partition(p)
        return [x for x in outcomes if self._streams[x[0].stream] not in down]

    def _current(self, p: int) -> bool:
        """Commands of partition ``p`` are handled now: it is held, and not fresh."""
        return p in self.held and p not in self.fresh

    def _parse(self, d: Delivery) -> CommandEnvelope | Finish:
        raw = d.fields.get(BODY, b"")
        try:
            return CommandEnvelope.model_validate_json(raw)
        except ValidationError as e:
            return self._malformed(self._streams[d.stream], d.id, raw, e)

    async def _prefetch(self, commands: Sequence[CommandEnvelope]) -> None:
        """Load every game of a batch that is not cached, in two round trips."""
        # Each command's game looked up: ``set - dict.keys()`` walks every cached game.
        missing = sorted({c.game_id for c in commands if c.game_id not in self.games})
        if not missing:
            return
        try:
            loaded = await self.store.load_many(missing, self.codec)
        except Exception:
            return  # some game does not load: each is loaded alone, isolating the failure
        deadlines = await self._deadlines(missing)
        for game_id, game in loaded.items():
            self.games[game_id] = CachedGame.of(
                game.state, game.version, game.seen, deadlines[game_id]
            )
        while len(self.games) > CACHE_GAMES:
            self.games.popitem(last=False)

    async def _decide(
        self, d: Delivery, env: CommandEnvelope, now: str
    ) -> tuple[str | None, Append | Finish]:
        """A command decided on its game's cached state; its events, if any, encoded as
        recorded at ``now`` (the batch's time)."""
        p = self._streams[d.stream]
        version: int | None = None
        try:
            if self.keys.partition(env.game_id) != p:
                raise Reject("wrong_partition", f"game {env.game_id} is not in partition {p}")
            cached = await self._game(env.game_id)
            version = cached.version
            seen = cached.seen.get(env.key)
            if seen is not None:
                self.stats["duplicates"] += 1
                result = CommandResult(
                    command_id=env.command_id,
                    game_id=env.game_id,
                    status="duplicate",
                    seat=env.seat,
                    version=seen,
                )
                return env.game_id, Finish(p, d.id, env.game_id, result, version=version)
            try:
                events = self._events(env, cached)
            except Reject:
                raise
            except Exception:
                self.games.pop(env.game_id, None)  # its cached state may be half-changed
                raise
        except Reject as r:
            return env.game_id, self._rejected(p, d.id, env, r.code, r.reason, version)
        # The engine made these events itself: encode them without building models (hot path).
        # Each gets an id of its own, never one made of game and version: after a failover
        # took a log's tail back, the events written again at those versions must differ
        # from the lost ones to readers, who tell a log that went back by the ids.
        made = Made(
            env.game_id, env.command_id, env.correlation_id or env.command_id, env.actor, now
        )
        ids = [new_event_id() for _ in events]
        encoded = made.encode(events, cached.version + 1, ids)
        append = Append(
            env.game_id, cached.version, encoded, env.command_id, (p, d.id), seat=env.seat
        )
        cached.version = append.version
        cached.seen[env.key] = append.version
        return env.game_id, append

    def _events(self, env: CommandEnvelope, cached: CachedGame) -> list[api.Event]:
        if env.type == "create_game":
            if cached.version:
                raise Reject("game_exists", f"game {env.game_id} already exists")
            cached.game, cached.state, events = self._new_game(env.payload)
            return events
        game = cached.game
        if game is None:
            raise Reject("unknown_game", f"there is no game {env.game_id}")
        try:
            return game.decide_into(cached.state, game.parse_command(env.rules_command()))
        except api.RuleViolation as v:
            raise Reject(v.code, v.reason) from None

    def _new_game(self, payload: dict[str, Any]) -> tuple[api.AnyGame, Any, list[api.Event]]:
        """A new game of the registered game the payload names (the default one if none)."""
        name = payload.get("game", api.DEFAULT_GAME)
        if not isinstance(name, str):
            raise Reject("malformed", "game is the name of a registered game")
        try:
            game = api.get(name)
        except api.UnknownGame as e:
            raise Reject("unsupported_game", str(e)) from None
        ruleset = payload.get("ruleset", game.default_ruleset)
        options = payload.get("options") or {}
        players = payload.get("players")
        seed = payload.get("seed")
        if not isinstance(ruleset, str) or not isinstance(options, dict):
            raise Reject("malformed", "ruleset is a name and options an object")
        if not isinstance(seed, int) or isinstance(seed, bool):
            raise Reject("malformed", "seed must be an integer")
        valid_names = isinstance(players, list) and all(isinstance(n, str) for n in players)
        if not valid_names and not (isinstance(players, int) and not isinstance(players, bool)):
            raise Reject("malformed", "players is a list of names or a number of seats")
        try:
            rules = game.rules(ruleset, options)
            state, events = game.new_game(rules, players, seed)  # type: ignore[arg-type]
        except api.RulesetError as e:
            raise Reject("bad_ruleset", str(e)) from None
        except api.RuleViolation as v:
            raise Reject(v.code, v.reason) from None
        return game, state, events

    async def _game(self, game_id: str) -> CachedGame:
        game = self.games.get(game_id)
        if game is not None:
            self.games.move_to_end(game_id)
            return game
        loaded = await self.store.load(game_id, self.codec)
        deadline_s = (await self._deadlines([game_id]))[game_id]
        cached = CachedGame.of(loaded.state, loaded.version, loaded.seen, deadline_s)
        self.games[game_id] = cached
        if len(self.games) > CACHE_GAMES:
            self.games.popitem(last=False)
        return cached

    async def _deadlines(self, game_ids: Sequence[str]) -> dict[str, float | None]:
        """Each game's move deadline as its table set it (in the seats hash the lobby writes
        before it creates the game); None where no lobby set one."""
        async with self.redis.pipeline(transaction=False) as pipe:
            for game_id in game_ids:
                pipe.hgetall(self.keys.seats(game_id))
            found: list[Any] = await pipe.execute()
        return {g: Seats.from_hash(raw).deadline_s for g, raw in zip(game_ids, found, strict=True)}

    def _rejected(
        self,
        p: int,
        entry_id: str,
        env: CommandEnvelope,
        code: str,
        reason: str,
        version: int | None = None,
    ) -> Finish:
        self.stats["rejected"] += 1
        self.stats[f"rejected:{code}"] += 1
        log.debug(
            "command rejected",
            code=code,
            reason=reason,
            game=env.game_id,
            command=env.command_id,
            seat=env.seat,
        )
        result = CommandResult(
            command_id=env.command_id,
            game_id=env.game_id,
            status="rejected",
            seat=env.seat,
            code=code,
            reason=reason,
        )
        rejection = Rejection(
            command_id=env.command_id, game_id=env.game_id, seat=env.seat, code=code, reason=reason
        )
        return Finish(p, entry_id, env.game_id, result, rejection, version)

    def _malformed(self, p: int, entry_id: str, raw: bytes, error: ValidationError) -> Finish:
        """A command that is not a valid envelope: answer its sender if it can be named."""
        self.stats["rejected"] += 1
        self.stats["rejected:malformed"] += 1
        try:
            doc = json.loads(raw)
        except ValueError:
            doc = None
        ids = doc if isinstance(doc, dict) else {}
        command_id, game_id, seat = ids.get("command_id"), ids.get("game_id"), ids.get("seat")
        seat = seat if isinstance(seat, int) and not isinstance(seat, bool) else None
        reason = "; ".join(
            f"{'.'.join(map(str, e['loc'])) or 'command'}: {e['msg']}" for e in error.errors()
        )[:500]
        named = isinstance(command_id, str) and isinstance(game_id, str) and game_id
        result = (
            CommandResult(
                command_id=command_id,
                game_id=game_id,
                status="rejected",
                seat=seat,
                code="malformed",
                reason=reason,
            )
            if named
            else None
        )
        rejection = Rejection(
            command_id=command_id if isinstance(command_id, str) else "",
            game_id=game_id if isinstance(game_id, str) else "",
            seat=seat,
            code="malformed",
            reason=reason,
        )
        return Finish(p, entry_id, game_id if named else None, result, rejection)

    def _count_by_game(self, accepted: Sequence[Append]) -> None:
        """The per-game metrics of a batch's accepted commands: commands, games created (an
        append at version 0) and games ended (over after the batch: nothing is accepted
        once a game is over, so this batch ended it)."""
        touched: dict[str, api.AnyGame] = {}
        commands: Counter[str] = Counter()  # by game name: a counter's labels cost per call
        started: Counter[str] = Counter()
        for a in accepted:
            cached = self.games.get(a.game_id)
            if cached is None or cached.game is None:
                continue
            name = cached.game.name
            commands[name] += 1
            if a.expected == 0:
                started[name] += 1
            touched[a.game_id] = cached.game
        for name, n in commands.items():
            metrics.GAME_COMMANDS.labels(name).inc(n)
        for name, n in started.items():
            metrics.GAMES_STARTED.labels(name).inc(n)
        for game_id, game in touched.items():
            if game.is_over(self.games[game_id].state):
                metrics.GAMES_ENDED.labels(game.name).inc()

    async def _finish(
        self, finishes: Sequence[tuple[int, Delivery, Finish]]
    ) -> list[tuple[int, Delivery]]:
        """Record each outcome; return those decided on a cached game whose log is behind
        it (a failover took its tail back): the game is dropped, to reload and decide again."""
        stale: list[tuple[int, Delivery]] = []
        for i, d, f in finishes:
            rejection = f.rejection.model_dump_json() if f.rejection else None
            args = (f.game_id, f.partition, f.result, f.entry_id, rejection, f.version)
            if not await self.store.finish(*args):
                log.warning("the log went back under a cached game", game=f.game_id)
                self.games.pop(f.game_id or "", None)
                stale.append((i, d))
                continue
            if f.rejection is not None:
                metrics.count_commands("rejected", f.rejection.code)
            else:
                metrics.count_commands("duplicate")
        return stale

    def _attach(self, appends: Sequence[Append]) -> None:
        """To the last append of every game the batch touched: decision requests for the
        game's state after it, and a snapshot of that state every N events and at the
        game's end (stored by the append itself, so only if the append is made)."""
        first: dict[str, Append] = {}
        last: dict[str, Append] = {}
        for a in appends:
            first.setdefault(a.game_id, a)
            last[a.game_id] = a
        now = datetime.now(UTC)
        every = self.settings.snapshot_every
        for game_id, a in last.items():
            cached = self.games.get(game_id)
            if cached is None or cached.game is None:
                continue
            game, state = cached.game, cached.state
            timeout = cached.deadline_s or self.settings.decision_timeout_s
            deadline = (now + timedelta(seconds=timeout)).isoformat()
            a.decisions = [
                _decision_json(game_id, a.version, d, deadline, game.legal_commands(state, d.seat))
                for d in game.pending(state)
            ]
            if a.version // every > first[game_id].expected // every or self._newly_over(game_id):
                a.snapshot = dump_json(self.codec.snapshot(state))

    async def _final_hashes(self, appends: Sequence[Append], results: Sequence[Any]) -> None:
        """Record the final state hash of every game the batch ended."""
        for a, r in zip(appends, results, strict=True):
            if r.status != "ok" or not self._newly_over(a.game_id):
                continue
            cached = self.games[a.game_id]
            if cached.version != a.version or cached.game is None:
                continue  # the game's last append of the batch records it
            state_hash = cached.game.state_hash(cached.state)
            await self.store.record_final_hash(a.game_id, state_hash, cached.version)
            cached.final_recorded = True

    def _newly_over(self, game_id: str) -> bool:
        """The cached game is over and its final hash not yet recorded."""
        cached = self.games.get(game_id)
        if cached is None or cached.game is None or cached.final_recorded:
            return False
        return cached.game.is_over(cached.state)
