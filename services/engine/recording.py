"""What the engine records after a batch's appends: the outcomes that append nothing, the
final hash of every game the batch ended, and the per-game metrics."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

import structlog

from shared.bus import Delivery
from shared.eventstore import Append, EventStore
from shared.observability import metrics

from .cache import CachedGame, GameCache
from .outcomes import Finish

log = structlog.get_logger("caravel.engine")


def hold_ends(cache: GameCache, appends: Sequence[Append], finishes: Sequence[Finish]) -> None:
    """Mark held the appends that end their games and the outcomes answered on a game over
    whose end is not recorded yet: their entries are acknowledged with that record
    (:func:`record_final_hashes`), so an engine stopped before it leaves them pending. The
    append script acknowledges the others: had it acknowledged an ending command too, a
    stop between the two calls would leave a game over that no command ever comes to again,
    never among the finished (never archived), as a chaos run of issue 25 found.

    After :func:`~.decision_requests.attach`, which tells of the last append of each game
    whether the game is over after it (:attr:`Append.over`; None on the others): the
    rules are not asked again here, once per append."""
    for a in appends:
        if a.over and a.entry:
            cached = cache.games.get(a.game_id)
            if cached is not None and cached.version == a.version:
                a.held = not cached.final_recorded
    for f in finishes:
        f.held = f.game_id is not None and cache.newly_over(f.game_id)


async def record_finishes(
    store: EventStore, cache: GameCache, finishes: Sequence[tuple[int, Delivery, Finish]]
) -> list[tuple[int, Delivery]]:
    """Record each outcome; return those decided on a cached game whose log is behind
    it (a failover took its tail back): the game is dropped, to reload and decide again."""
    stale: list[tuple[int, Delivery]] = []
    for i, d, f in finishes:
        rejection = f.rejection.model_dump_json() if f.rejection else None
        entry = None if f.held else f.entry_id
        args = (f.game_id, f.partition, f.result, entry, rejection, f.version)
        if not await store.finish(*args):
            log.warning("the log went back under a cached game", game=f.game_id)
            cache.games.pop(f.game_id or "", None)
            stale.append((i, d))
            continue
        if f.rejection is not None:
            metrics.count_commands("rejected", f.rejection.code)
        else:
            metrics.count_commands("duplicate")
    return stale


async def record_final_hashes(
    store: EventStore,
    cache: GameCache,
    appends: Sequence[Append],
    results: Sequence[Any],
    finished: Sequence[Finish] = (),
) -> None:
    """Record the final state hash of every game the batch ended, and of the games over
    with none recorded that the batch answered without appending (``finished``, recorded),
    acknowledging the entries held for it (:func:`hold_ends`). The append that ended a game
    may have been written while its recording was not (Redis refused it, or the engine was
    killed in between): the ending command, still pending, comes again and is answered as
    a duplicate, the only command that comes to a game over, so the end is recorded then."""
    held: dict[str, list[str]] = {}
    for a, r in zip(appends, results, strict=True):
        if a.held and a.entry and r.status == "ok":
            held.setdefault(a.game_id, []).append(a.entry[1])
    for f in finished:
        if f.held and f.game_id is not None:
            held.setdefault(f.game_id, []).append(f.entry_id)
    for game_id, entries in held.items():
        if cache.newly_over(game_id):
            await _record(store, cache, game_id, entries)
        # else: its end was recorded meanwhile; the entries, pending, come again and are
        # answered as duplicates, acknowledged then


async def _record(store: EventStore, cache: GameCache, game_id: str, entries: list[str]) -> None:
    """Record the cached game's final hash (it is over), acknowledging ``entries``."""
    cached = cache.games[game_id]
    assert cached.game is not None
    state_hash = cached.game.state_hash(cached.state)
    await store.record_final_hash(game_id, state_hash, cached.version, entries)
    cached.final_recorded = True


def count_by_game(cache: GameCache, accepted: Sequence[Append]) -> None:
    """The per-game metrics of a batch's accepted commands: commands, games created (an
    append at version 0) and games ended (over after the batch: nothing is accepted
    once a game is over, so this batch ended it)."""
    games = cache.games
    touched: dict[str, tuple[CachedGame, Append]] = {}  # each game's last accepted append
    commands: Counter[str] = Counter()  # by game name: a counter's labels cost per call
    started: Counter[str] = Counter()
    for a in accepted:
        cached = games.get(a.game_id)
        if cached is None or cached.game is None:
            continue
        name = cached.game.name
        commands[name] += 1
        if a.expected == 0:
            started[name] += 1
        touched[a.game_id] = (cached, a)
    for name, n in commands.items():
        metrics.GAME_COMMANDS.labels(name).inc(n)
    for name, n in started.items():
        metrics.GAMES_STARTED.labels(name).inc(n)
    for cached, a in touched.values():
        game = cached.game
        assert game is not None
        # ``over`` as attach found it after the game's last append (asked again if unset)
        if a.over if a.over is not None else game.is_over(cached.state):
            metrics.GAMES_ENDED.labels(game.name).inc()
