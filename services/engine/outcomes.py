"""What a command that appends nothing comes to: a refusal (by the rules, or of a malformed
or misplaced command) or a duplicate, answered to its sender without an event; and the
checks of a new game's payload, which refuse the same way."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any, Literal

import structlog
from pydantic import ValidationError

from shared.contracts import CommandEnvelope, CommandResult, Rejection, load_json
from shared.games import api

log = structlog.get_logger("caravel.engine")


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
    held: bool = False  # acknowledged with its game's end, as :attr:`Append.held`


class Reject(Exception):
    def __init__(self, code: str, reason: str) -> None:
        super().__init__(reason)
        self.code, self.reason = code, reason


def rejected(
    stats: Counter[str],
    p: int,
    entry_id: str,
    env: CommandEnvelope,
    code: str,
    reason: str,
    version: int | None = None,
) -> Finish:
    """A command the engine refuses, counted in ``stats``."""
    stats["rejected"] += 1
    stats[f"rejected:{code}"] += 1
    log.debug(
        "command rejected",
        code=code,
        reason=reason,
        game=env.game_id,
        command=env.command_id,
        seat=env.seat,
    )
    result = answer(env, "rejected", code=code, reason=reason)
    rejection = Rejection(
        command_id=env.command_id, game_id=env.game_id, seat=env.seat, code=code, reason=reason
    )
    return Finish(p, entry_id, env.game_id, result, rejection, version)


def answer(
    env: CommandEnvelope,
    status: Literal["accepted", "duplicate", "rejected"],
    **fields: Any,
) -> CommandResult | None:
    """The answer the engine stores for ``env``'s sender, with ``fields`` (version, code,
    reason); None for the bot player's commands, whose answers nobody reads
    (:attr:`~shared.contracts.CommandEnvelope.answered`)."""
    if not env.answered:
        return None
    return CommandResult(
        command_id=env.command_id, game_id=env.game_id, status=status, seat=env.seat, **fields
    )


def malformed(
    stats: Counter[str], p: int, entry_id: str, raw: bytes, error: ValidationError
) -> Finish:
    """A command that is not a valid envelope: answer its sender if it can be named."""
    stats["rejected"] += 1
    stats["rejected:malformed"] += 1
    try:
        doc = load_json(raw)
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


def new_game(payload: dict[str, Any]) -> tuple[api.AnyGame, Any, list[api.Event]]:
    """A new game of the registered game the payload names (the default one if none);
    raises :class:`Reject` for a payload that names no game, ruleset or seats it can deal."""
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
