"""What the engine attaches to a batch's appends: the decision requests of every game it
touched (each pending seat, its legal commands and deadline) and the snapshots due."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from functools import lru_cache

from shared.contracts import dump_json
from shared.eventstore import Append, GameCodec
from shared.games import api
from shared.settings import Settings

from .cache import GameCache


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
    for game_id, a in last.items():
        cached = games.get(game_id)
        if cached is None or cached.game is None:
            continue
        game, state = cached.game, cached.state
        timeout = cached.deadline_s or settings.decision_timeout_s
        deadline = (now + timedelta(seconds=timeout)).isoformat()
        a.decisions = [
            _decision_json(game_id, a.version, d, deadline, game.legal_commands(state, d.seat))
            for d in game.pending(state)
        ]
        if a.version // every > first[game_id].expected // every or cache.newly_over(game_id):
            a.snapshot = dump_json(codec.snapshot(state))
