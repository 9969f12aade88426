"""What the engine attaches to a batch's appends: the decision requests of every game it
touched (each pending seat, its legal commands and deadline) and the snapshots due."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from functools import lru_cache

from shared.contracts import dump_json, name_json, string_json
from shared.eventstore import Append, GameCodec, Pending
from shared.games import api
from shared.settings import Settings

from .cache import GameCache


@lru_cache(maxsize=65536)
def _command_json(command: api.Command) -> str:
    return dump_json(command.to_dict())


def _decision_json(
    game_json: str,
    version: int,
    decision: api.Decision,
    deadline_json: str,
    legal: list[api.Command],
) -> str:
    """A :class:`DecisionRequest` as JSON (its keys in the model's order), written by hand:
    the engine sends one after every batch for every game it touched. The game's id and the
    deadline come encoded (once per game, once per batch), commands repeat (their JSON is
    cached) and a request id is the game's with its version and seat."""
    seat = decision.seat
    return (
        f'{{"request_id":{game_json[:-1]}:{version}:{seat}","game_id":{game_json},'
        f'"version":{version},"seat":{seat},"kind":{name_json(decision.kind)},'
        f'"deadline":{deadline_json},"correlation_id":null,'
        f'"legal_commands":[{",".join(map(_command_json, legal))}]}}'
    )


def attach(
    appends: Sequence[Append], cache: GameCache, settings: Settings, codec: GameCodec
) -> None:
    """To the last append of every game the batch touched: decision requests for the
    game's state after it, and a snapshot of that state every N events and at the
    game's end (stored by the append itself, so only if the append is made)."""
    first: dict[str, Append] = {}
    last: dict[str, Append] = {}
    for a in appends:
        first.setdefault(a.game_id, a)
        last[a.game_id] = a
    now = datetime.now(UTC)
    every = settings.snapshot_every
    games = cache.games
    stamp = now.timestamp()
    deadlines: dict[float, str] = {}  # a timeout's deadline JSON, once per batch
    for game_id, a in last.items():
        cached = games.get(game_id)
        if cached is None or cached.game is None:
            continue
        game, state = cached.game, cached.state
        timeout = cached.deadline_s or settings.decision_timeout_s
        deadline = deadlines.get(timeout)
        if deadline is None:
            deadline = deadlines[timeout] = dump_json(
                (now + timedelta(seconds=timeout)).isoformat()
            )
        game_json, version, legal = string_json(game_id), a.version, game.legal_commands
        due = stamp + timeout  # a human seat's clock: the request's deadline
        a.decisions = [
            Pending(
                d.seat, due, _decision_json(game_json, version, d, deadline, legal(state, d.seat))
            )
            for d in game.pending(state)
        ]
        a.over = game.is_over(state)  # the requests are every seat's: kept for /legal too
        if a.version // every > first[game_id].expected // every or cache.newly_over(game_id):
            a.snapshot = dump_json(codec.snapshot(state))
