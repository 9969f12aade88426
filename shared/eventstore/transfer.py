"""Moving one game's log between deployments (``caravel games export|import``).

Export reads the log as any reader does (Redis, or the archive for an archived game).
Import writes it through the event store's atomic append at version 0, in one script: the
versions stay as they were, the partition's readers (views, scoring) are told as for any
append, and an id already taken (in Redis or in the archive) is refused, also when two
imports race. The log is not trusted: every command's events are decided again by the
rules, and a finished game's final hash must be the one its export carries; a finished game
then gets its final hash, replayed from the log.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from shared.contracts import IMPORTED, EventEnvelope, key_json, load_json
from shared.games import api

from .codec import GameCodec, to_event
from .logfile import ExportHeader, caravel_version, check_log
from .store import Append, EventStore


class GameExists(Exception):
    """An import names a game that Redis or the archive already holds."""

    def __init__(self, game_id: str) -> None:
        super().__init__(f"game {game_id} exists already: nothing was imported")
        self.game_id = game_id


async def export_log(store: EventStore, game_id: str) -> list[EventEnvelope]:
    """The game's whole log with its server-only parts (empty: there is no such game)."""
    return await store.read(game_id)


async def final_hash(store: EventStore, events: Sequence[EventEnvelope]) -> str | None:
    """A finished game's final hash, for its export: the engine's record (an archived game's
    is replayed: it was verified against the record when it was archived); None while the
    game runs."""
    if not events:
        return None
    recorded = await store.final_hash(events[0].game_id)
    if recorded is not None:
        return recorded
    codec = GameCodec()
    state = codec.replay(events)
    return codec.state_hash(state) if api.of(state).is_over(state) else None


async def import_log(
    store: EventStore, events: Sequence[EventEnvelope], header: ExportHeader | None = None
) -> int:
    """Append a whole exported log as a new game; returns its version. Raises ValueError
    for a log that is not one game's whole log, that its game's rules refuse (each move is
    decided again: an edited event names the first version no legal move leads to), or
    whose final hash is not the one its export's ``header`` carries; and
    :class:`GameExists` if the id is taken. The game's seats hash says it was imported
    (written before its events, which scoring reads it with: analytics mark it)."""
    game_id = check_log(events)
    if header is not None and header.events != len(events):
        raise ValueError(f"{game_id}: the export has {len(events)} of its {header.events} events")
    if await store.exists(game_id):
        raise GameExists(game_id)
    codec = GameCodec()
    try:
        state = decided_again(events)
    except ValueError:
        raise
    except Exception as e:  # a file from elsewhere: anything its rules raise means "no"
        raise ValueError(f"{game_id}: the log does not replay: {e}") from e
    over = api.of(state).is_over(state)
    final_hash = codec.state_hash(state) if over else None
    if header is not None and header.final_hash != final_hash:
        written = f"written by Caravel {header.caravel_version}"
        message = f"its replay ends with hash {final_hash}, the export says {header.final_hash}"
        raise ValueError(f"{game_id}: {message} ({written}, this is {caravel_version()})")
    seats = store.keys.seats(game_id)
    marked = await store.redis.hsetnx(seats, IMPORTED, "1")  # before its events: scoring
    result = await store.append(Append(game_id, 0, [event.encode() for event in events]))
    if result.status != "ok":
        if marked:  # a game that got the id meanwhile keeps its own seats
            await store.redis.hdel(seats, IMPORTED)
        raise GameExists(game_id)
    if final_hash is not None:
        await store.record_final_hash(game_id, final_hash, result.version)
    return result.version


def decided_again(events: Sequence[EventEnvelope]) -> Any:
    """The state a log leads to, each command's events checked against the rules: every
    run of events one command caused (one causation id) must be what some legal command of
    a seat due to decide causes, decided again from the state before it. A log edited by
    hand (an amount changed, a total forged) fails at the first version that differs:
    ValueError naming it. The first run, the game's creation, is made again from its seed."""
    codec = GameCodec()
    state = codec.initial(events[0])
    game = api.of(state)
    if any(e.causation_id is None for e in events):
        # Logs written before events named their command cannot be cut into commands: they
        # are replayed, and only their final hash is checked.
        for event in events[1:]:
            codec.apply(state, event)
        return state
    for run in _runs(events):
        wanted = [_fact(to_event(e)) for e in run]
        if run[0].version == 1:
            _check_creation(game, run, wanted)
        else:
            _check_move(game, state, run, wanted)
        for event in run:
            codec.apply(state, event)
    return state


def _check_move(
    game: api.AnyGame, state: Any, run: Sequence[EventEnvelope], wanted: list[Any]
) -> None:
    """The run of one command against what each legal move causes now; ValueError naming
    the first event no legal move leads to (after the longest run some move agrees with)."""
    agreed = 0
    for caused in _moves(game, state):
        facts = [_fact(e) for e in caused]
        if facts == wanted:
            return
        same = next(
            (i for i, (a, b) in enumerate(zip(facts, wanted, strict=False)) if a != b), None
        )
        agreed = max(agreed, min(len(facts), len(wanted)) if same is None else same)
    event = run[min(agreed, len(run) - 1)]
    raise ValueError(
        f"{event.game_id}: version {event.version} ({event.type}) is not what any legal "
        "move leads to: the log was edited or comes from other rules"
    )


def _check_creation(game: api.AnyGame, run: Sequence[EventEnvelope], wanted: list[Any]) -> None:
    """The creation run against a new game made again from its rules, players and seed
    (when its ``game_created`` keeps the seed, as the games do, in its secret part)."""
    created = run[0]
    seed = (created.secret or {}).get("seed")
    if not isinstance(seed, int):
        return
    rules = game.rules_named(created.data)
    _, made = game.new_game(rules, created.data["players"], seed)
    made_facts = [_fact(e) for e in made]
    # Which event versions the code wrote is no fact of the game: a log written before a
    # version bump records older ones (its events are read upcast).
    for facts in (wanted[:1], made_facts[:1]):
        facts[0]["data"].pop("event_versions", None)
    for event, fact, again in zip(run, wanted, made_facts, strict=False):
        if fact != again:
            raise ValueError(
                f"{created.game_id}: version {event.version} ({event.type}) is not what "
                "creating the game leads to: the log was edited or comes from other rules"
            )
    if len(made_facts) != len(wanted):
        raise ValueError(
            f"{created.game_id}: its creation has {len(wanted)} events, not {len(made)}"
        )


def _runs(events: Sequence[EventEnvelope]) -> list[list[EventEnvelope]]:
    """The log cut into the runs of events of one command each."""
    runs: list[list[EventEnvelope]] = []
    for event in events:
        if runs and runs[-1][-1].causation_id == event.causation_id:
            runs[-1].append(event)
        else:
            runs.append([event])
    return runs


def _moves(game: api.AnyGame, state: Any) -> Iterator[list[api.Event]]:
    """The events each legal command of each seat due to decide causes now."""
    for decision in game.pending(state):
        for command in game.legal_commands(state, decision.seat):
            try:
                yield game.decide(state, command)
            except api.RuleViolation:
                continue


def _fact(event: api.Event) -> Any:
    """An event as plain JSON data, to compare a logged event with a decided one."""
    return load_json(key_json(event.to_dict(include_secret=True)))
