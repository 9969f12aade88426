"""Deciding one command: parsed from its stream entry, checked against its partition and the
ids already applied, decided by its game's rules on the cached state, and its events encoded
as the append that records them (or the :class:`~.outcomes.Finish` that answers it)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

from pydantic import ValidationError

from shared.bus import BODY, Delivery, Keys
from shared.contracts import (
    CommandEnvelope,
    Kept,
    Made,
    dump_json,
    new_tuple,
    read_command,
)
from shared.eventstore import Append
from shared.games import api

from .cache import CachedGame, GameCache
from .decision_requests import command_json
from .outcomes import Finish, Reject, answer, malformed, new_game, rejected


class Decider:
    """Decides the commands of the partitions' streams (``streams``: stream -> partition)
    on the games of ``cache``, counting outcomes in ``stats``."""

    def __init__(
        self, keys: Keys, cache: GameCache, streams: dict[str, int], stats: Counter[str]
    ) -> None:
        self.keys, self.cache, self.streams, self.stats = keys, cache, streams, stats
        # A game's partition, hashed once per game, not once per command.
        self.partition: Callable[[str], int] = Kept(keys.partition, 65_536).__getitem__

    def parse(self, d: Delivery) -> CommandEnvelope | Finish:
        """The delivery's command, or the refusal of a malformed one."""
        raw = d.fields.get(BODY, b"")
        try:
            return read_command(raw)
        except ValidationError as e:
            return malformed(self.stats, self.streams[d.stream], d.id, raw, e)

    def decide_now(
        self, d: Delivery, env: CommandEnvelope, now: str
    ) -> tuple[str | None, Append | Finish] | None:
        """:meth:`decide` without a coroutine, for a command whose game is cached (nearly
        every one: a batch's games are loaded before it is decided) or that is refused for
        its partition; None for any other, which :meth:`decide` loads first."""
        p = self.streams[d.stream]
        game_id = env.game_id
        if self.partition(game_id) != p:
            reason = f"game {game_id} is not in partition {p}"
            return game_id, rejected(self.stats, p, d.id, env, "wrong_partition", reason)
        games = self.cache.games
        cached = games.get(game_id)
        if cached is None:
            return None
        games.move_to_end(game_id)
        return self._decided(d, env, now, p, cached)

    async def decide(
        self, d: Delivery, env: CommandEnvelope, now: str
    ) -> tuple[str | None, Append | Finish]:
        """A command decided on its game's cached state (loaded first if missing); its
        events, if any, encoded as recorded at ``now`` (the batch's time)."""
        outcome = self.decide_now(d, env, now)
        if outcome is not None:
            return outcome
        cached = await self.cache.get(env.game_id)
        return self._decided(d, env, now, self.streams[d.stream], cached)

    def _decided(
        self, d: Delivery, env: CommandEnvelope, now: str, p: int, cached: CachedGame
    ) -> tuple[str | None, Append | Finish]:
        """The command decided on ``cached``, the state of its game (of partition ``p``)."""
        version = cached.version
        try:
            key = env.key  # its seat's id, made once (a property that formats it)
            seen = cached.seen.get(key)
            if seen is not None:
                self.stats["duplicates"] += 1
                result = answer(env, "duplicate", version=seen)
                return env.game_id, Finish(p, d.id, env.game_id, result, version=version)
            try:
                events = self._events(env, cached)
            except Reject:
                raise
            except Exception:
                self.cache.games.pop(env.game_id, None)  # its cached state may be half-changed
                raise
        except Reject as r:
            return env.game_id, rejected(self.stats, p, d.id, env, r.code, r.reason, version)
        # The engine made these events itself: encode them without building models (hot path).
        # Each gets an id of its own, never one made of game and version: after a failover
        # took a log's tail back, the events written again at those versions must differ
        # from the lost ones to readers, who tell a log that went back by the ids.
        command_id = env.command_id
        made = new_tuple(  # Made(...), without the named tuple's Python-level __new__
            Made, (env.game_id, command_id, env.correlation_id or command_id, env.actor, now)
        )
        encoded = made.encode(events, version + 1)  # new event ids
        append = Append(
            env.game_id,
            version,
            encoded,
            command_id,
            (p, d.id),
            (),
            None,
            env.seat,
            "",
            False,
            key,
            env.answered,
        )
        cached.version = cached.seen[key] = version + len(encoded)  # the append's version
        return env.game_id, append

    def _events(self, env: CommandEnvelope, cached: CachedGame) -> list[api.Event]:
        if env.type == "create_game":
            if cached.version:
                raise Reject("game_exists", f"game {env.game_id} already exists")
            cached.game, cached.state, events = new_game(env.payload)
            return events
        game = cached.game
        if game is None:
            raise Reject("unknown_game", f"there is no game {env.game_id}")
        try:
            # A command listed in the seat's last decision request at this very state is
            # legal: the rules skip checking it again (their ``trusted``), the same events.
            # Sent as listed (its payload's fields in the listing's order, as bots send
            # them), it is found by its JSON without parsing it: the listed command itself.
            memo = cached.legal
            listed = None if memo is None else _as_listed(env, cached)
            if listed is not None:
                return game.decide_into(cached.state, listed, trusted=True)
            command = game.parse_command(env.rules_command())
            again = None if memo is None else cached.listed(command_json(command), command.seat)
            return game.decide_into(cached.state, command, trusted=again is not None)
        except api.RuleViolation as v:
            raise Reject(v.code, v.reason) from None


def _as_listed(env: CommandEnvelope, cached: CachedGame) -> api.Command | None:
    """The listed legal command ``env`` is, if it comes as the engine listed it: ``type``,
    ``seat``, then the payload's fields, their JSON the listing's (equal JSON, equal
    command). A payload naming a type or seat of its own is parsed as any other."""
    payload = env.payload
    if "type" in payload or "seat" in payload:
        return None
    return cached.listed(dump_json({"type": env.type, "seat": env.seat, **payload}), env.seat)
