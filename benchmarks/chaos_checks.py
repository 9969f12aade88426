"""The chaos benchmark's checks: what the logs, the scoring tables and the clients' answers
must agree on after the faults, and the events per second of each cluster shard around
each Redis kill.
"""

from __future__ import annotations

import asyncio
import bisect
import random
import statistics
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from services.lobby.db import make_engine
from services.scoring.service import ScoringService
from shared.contracts import EventEnvelope
from shared.eventstore import EventStore
from shared.eventstore.codec import GameCodec
from shared.eventstore.logfile import check_log
from shared.eventstore.transfer import decided_again
from tests.scoring.helpers import dump

from .chaos_faults import Kill
from .chaos_load import Tally

SAMPLE_S = 0.5


@dataclass
class Progress:
    """Each game's version, sampled every ``SAMPLE_S`` shard by shard (a shard that did not
    answer has no entry in that sample)."""

    samples: list[tuple[float, dict[int, dict[str, int]]]] = field(default_factory=list)
    moved_at: dict[str, float] = field(default_factory=dict)  # game -> when it last moved
    versions: dict[str, int] = field(default_factory=dict)


async def sample(
    store: EventStore,
    games: list[str],
    shard_of: Callable[[str], int],
    out: Progress,
    stop: asyncio.Event,
) -> None:
    while not stop.is_set():
        by_shard: dict[int, list[str]] = {}
        for game in list(games):
            by_shard.setdefault(shard_of(game), []).append(game)
        at = time.monotonic()
        found = await asyncio.gather(*(_versions(store, g) for g in by_shard.values()))
        sample_: dict[int, dict[str, int]] = {}
        for shard, versions in zip(by_shard, found, strict=True):
            if versions is None:
                continue
            sample_[shard] = versions
            for game, version in versions.items():
                if version != out.versions.get(game):
                    out.versions[game] = version
                    out.moved_at[game] = at
        out.samples.append((at, sample_))
        await asyncio.sleep(SAMPLE_S)


async def _versions(store: EventStore, games: list[str]) -> dict[str, int] | None:
    try:
        async with store.redis.pipeline(transaction=False) as pipe:
            for game in games:
                pipe.hget(store.keys.meta(game), "version")
            raw: list[Any] = await asyncio.wait_for(pipe.execute(), 2)
    except Exception:
        return None
    return {g: int(v) if v else 0 for g, v in zip(games, raw, strict=True)}


@dataclass(frozen=True)
class ShardFigures:
    kind: str
    others_ratio: float  # the other shards' events/s during the fault / the 5 s before it
    hit_answers_again_s: float | None  # the hit shard's first event after the kill
    # The same against a quiet baseline (:func:`shard_figures`): the other shards' events
    # and seconds while the hit shard is stalled, and in the quiet seconds before the kill.
    during_events: int = 0
    during_s: float = 0.0
    quiet_events: int = 0
    quiet_s: float = 0.0

    @property
    def quiet_ratio(self) -> float | None:
        """The other shards' events/s while the hit shard stalls over their events/s in the
        quiet seconds before the kill (None: less than ``MIN_QUIET_S`` of those)."""
        if self.quiet_s < MIN_QUIET_S or not self.quiet_events:
            return None
        return round((self.during_events / self.during_s) / (self.quiet_events / self.quiet_s), 3)


MIN_QUIET_S = 1.0  # a kill with fewer quiet seconds before it has no quiet baseline
QUIET_S = 10.0  # the quiet baseline: at most this many seconds, the last before the kill


def pooled_ratio(figures: Sequence[ShardFigures]) -> float | None:
    """The other shards' events/s over every stall of ``figures`` over their events/s over
    every quiet baseline (the kills with one): bursts weigh by their seconds, not by kill."""
    kept = [f for f in figures if f.quiet_ratio is not None]
    during_s, quiet_s = sum(f.during_s for f in kept), sum(f.quiet_s for f in kept)
    quiet = sum(f.quiet_events for f in kept)
    if not kept or not quiet or not during_s:
        return None
    return round((sum(f.during_events for f in kept) / during_s) / (quiet / quiet_s), 3)


def shard_figures(
    times: dict[int, list[float]],
    kills: Sequence[Kill],
    shards: int,
    window_s: float = 5.0,
    healthy_s: Sequence[float | None] = (),
) -> list[ShardFigures]:
    """For each master or replica kill, from the events' ``recorded_at`` (``times``: each
    shard's, sorted): the hit shard's first event after the kill; the other shards' events
    during the stall (from the kill until the hit shard records an event again, at least
    2 s) against the ``window_s`` before it (``others_ratio``); and against the quiet
    seconds before it (``quiet_ratio``): from the end of the fault before (its cluster
    healthy again and its hit shard moving again, whichever is later) to this kill, the last
    ``QUIET_S`` of them at most. ``healthy_s``: each node kill's seconds from the kill to a
    healthy cluster, in the order of ``kills`` (``Killer.phases``). The 5 s before a kill
    held the fault before it about as often as not (a kill every ~4 s, a master's fault
    lasting ~5 s), and its catch-up burst or stall moved the baseline, not the kill."""
    out = []
    node_kills = [k for k in kills if k.shard is not None]
    first_event = min((t[0] for t in times.values() if t), default=0.0)
    quiet_from = first_event
    for n, kill in enumerate(node_kills):
        assert kill.shard is not None
        hit = times.get(kill.shard, [])
        first = bisect.bisect_right(hit, kill.at)
        back = round(hit[first] - kill.at, 2) if first < len(hit) else None
        during = max(back if back is not None else window_s, 2.0)
        others = [times.get(s, []) for s in range(shards) if s != kill.shard]
        before = sum(_count(t, kill.at - window_s, kill.at) for t in others) / window_s
        now_events = sum(_count(t, kill.at, kill.at + during) for t in others)
        now = now_events / during
        quiet_start = max(quiet_from, kill.at - QUIET_S)
        quiet_s = max(kill.at - quiet_start, 0.0)
        quiet_events = sum(_count(t, quiet_start, kill.at) for t in others) if quiet_s else 0
        healthy = healthy_s[n] if n < len(healthy_s) else None
        quiet_from = kill.at + max(back or 0.0, healthy or 0.0)
        out.append(
            ShardFigures(
                kill.kind,
                round(now / before, 3) if before else 0.0,
                back,
                now_events,
                during,
                quiet_events,
                round(quiet_s, 2),
            )
        )
    return out


@dataclass(frozen=True)
class LiveGames:
    """One kill's other-shard games measured per second each was alive (from its first
    event to its last): its events and game-seconds while the hit shard stalls and in the
    quiet seconds before. The shard totals count the games present as much as their pace: a
    closed loop of tables that opens its next one on a random shard moves tables onto the
    hit shard during a stall, which lowers the others' events/s though no game of theirs
    slowed. Per game-second, only the pace of the games that are there counts."""

    kind: str
    during_events: int
    during_game_s: float
    quiet_events: int
    quiet_game_s: float

    @property
    def ratio(self) -> float | None:
        if not (self.quiet_events and self.quiet_game_s and self.during_game_s):
            return None
        during = self.during_events / self.during_game_s
        return round(during / (self.quiet_events / self.quiet_game_s), 3)


def live_games(
    games: Sequence[tuple[int, list[float]]],
    kills: Sequence[Kill],
    figures: Sequence[ShardFigures],
) -> list[LiveGames]:
    """:class:`LiveGames` for each node kill with a quiet baseline (``figures`` are
    :func:`shard_figures`'s for the same kills, in order): ``games`` is each game's shard and
    its events' sorted times."""
    out = []
    node_kills = [k for k in kills if k.shard is not None]
    for kill, f in zip(node_kills, figures, strict=True):
        if f.quiet_ratio is None:
            continue
        stall = (kill.at, kill.at + f.during_s)
        quiet = (kill.at - f.quiet_s, kill.at)
        counts = [0, 0.0, 0, 0.0]
        for shard, times in games:
            if shard == kill.shard or not times:
                continue
            for i, (start, end) in enumerate((stall, quiet)):
                alive = min(end, times[-1]) - max(start, times[0])
                if alive > 0:
                    counts[2 * i] += _count(times, start, end)
                    counts[2 * i + 1] += alive
        out.append(LiveGames(kill.kind, int(counts[0]), counts[1], int(counts[2]), counts[3]))
    return out


def pooled_live(figures: Sequence[LiveGames]) -> float | None:
    """:class:`LiveGames` pooled: every stall's events over its game-seconds, over every
    quiet baseline's."""
    kept = [f for f in figures if f.ratio is not None]
    if not kept:
        return None
    during = sum(f.during_events for f in kept) / sum(f.during_game_s for f in kept)
    return round(
        during / (sum(f.quiet_events for f in kept) / sum(f.quiet_game_s for f in kept)), 3
    )


def pooled_live_interval(
    figures: Sequence[LiveGames], rounds: int = 2000, share: float = 0.9
) -> tuple[float, float] | None:
    """A ``share`` interval of :func:`pooled_live` over the kills, by resampling them
    (bootstrap, a fixed seed: the same run prints the same interval). With ten kills and a
    few games a shard, one kill whose games happened to start or end then moves the pooled
    ratio by a tenth: the interval says how far from 0.9 a run's figure has to be to mean
    anything."""
    kept = [f for f in figures if f.ratio is not None]
    if len(kept) < 2:
        return None
    rng = random.Random(0)
    found = sorted(
        r for _ in range(rounds) if (r := pooled_live(rng.choices(kept, k=len(kept)))) is not None
    )
    cut = int(len(found) * (1 - share) / 2)
    return found[cut], found[-1 - cut]


def _count(times: list[float], start: float, end: float) -> int:
    return bisect.bisect_left(times, end) - bisect.bisect_left(times, start)


@dataclass
class Verdict:
    games: int = 0
    events: int = 0
    finished: int = 0
    gaps: list[str] = field(default_factory=list)
    duplicate_event_ids: int = 0
    duplicated_commands: list[str] = field(default_factory=list)  # one command, two runs
    lost: list[str] = field(default_factory=list)
    wrongly_refused: list[str] = field(default_factory=list)
    replay_mismatches: list[str] = field(default_factory=list)
    stuck_games: list[str] = field(default_factory=list)
    stuck_tables: list[str] = field(default_factory=list)
    # Tables running without a game at the first look that got one by the reconciler's
    # retry: starts that failed under a kill and were seen through (not a failure).
    started_late: list[str] = field(default_factory=list)
    scoring_differs: list[str] = field(default_factory=list)


def _runs(events: Sequence[EventEnvelope]) -> list[tuple[str | None, int]]:
    """Each run of events one command caused: its causation id and its last version."""
    runs: list[tuple[str | None, int]] = []
    for event in events:
        if runs and runs[-1][0] == event.causation_id and event.causation_id is not None:
            runs[-1] = (event.causation_id, event.version)
        else:
            runs.append((event.causation_id, event.version))
    return runs


async def check_logs(
    store: EventStore, tally: Tally, verdict: Verdict
) -> dict[str, list[EventEnvelope]]:
    """Every log gap-free and replayable to its recorded final hash, with each command
    deciding again as recorded; event ids unique; every command acknowledged to a client
    once in the log, at the version it was answered; every refusal justified (the game had
    moved on by another's command when it was refused)."""
    keys = store.keys
    games: set[str] = set(tally.games)
    for p in keys.all_partitions():
        games |= {g.decode() for g in await store.redis.smembers(keys.games(p))}
    event_ids: Counter[str] = Counter()
    placed: dict[str, dict[str, list[int]]] = {}  # game -> command id -> last versions
    logs: dict[str, list[EventEnvelope]] = {}
    for game in sorted(games):
        events = await store.read(game)
        logs[game] = events
        if not events:
            continue
        verdict.games += 1
        verdict.events += len(events)
        event_ids.update(e.event_id for e in events)
        try:
            check_log(events)
        except ValueError as e:
            verdict.gaps.append(str(e))
            continue
        runs = _runs(events)
        placed[game] = {}
        for command_id, version in runs:
            if command_id is not None:
                placed[game].setdefault(command_id, []).append(version)
        verdict.duplicated_commands += [
            f"{game} {c} at {v}" for c, v in placed[game].items() if len(v) > 1
        ]
        await _replay(store, game, events, verdict)
    verdict.duplicate_event_ids = sum(n - 1 for n in event_ids.values() if n > 1)
    for a in tally.acked:
        at = placed.get(a.game, {}).get(a.command_id, [])
        if at != [a.version]:
            verdict.lost.append(f"{a.game} {a.command_id} acked at {a.version}, log: {at}")
    for r in tally.refused:
        if _refused_wrongly(r.legal_version, logs.get(r.game, []), tally.sent.get(r.game, set())):
            verdict.wrongly_refused.append(
                f"{r.game} {r.command_id} at {r.legal_version} {r.code}: {r.detail}"
            )
    return logs


def _refused_wrongly(version: int, events: list[EventEnvelope], ours: set[str]) -> bool:
    """A command taken from the legal commands at ``version`` was refused: rightly if the
    game had moved on by then through another's command (a bot's, or the views were
    behind); wrongly if the next event was our own next command (nobody else moved: the
    engine refused a legal move at the version it was legal at)."""
    following = [e for e in events if e.version == version + 1]
    return bool(following) and following[0].causation_id in ours


async def _replay(
    store: EventStore, game: str, events: list[EventEnvelope], verdict: Verdict
) -> None:
    codec = GameCodec()
    try:
        state = decided_again(events)
    except Exception as e:
        verdict.replay_mismatches.append(f"{game}: {e}")
        return
    recorded = await store.final_hash(game)
    if recorded is None:
        return
    verdict.finished += 1
    if codec.state_hash(state) != recorded:
        verdict.replay_mismatches.append(f"{game}: final hash differs from its replay")


def stuck_games(progress: Progress, over: set[str], still_s: float) -> list[str]:
    """Games not over that have not moved for ``still_s`` by the end of the run."""
    now = time.monotonic()
    return sorted(g for g, at in progress.moved_at.items() if g not in over and now - at >= still_s)


async def scoring_equals_rebuild(store: EventStore, sql_url: str, verdict: Verdict) -> None:
    """The live scoring tables (its service stopped once caught up) against a rebuild."""
    db = make_engine(sql_url)
    try:
        live = await asyncio.to_thread(dump, db)
        await ScoringService(store.redis, store.keys, db).rebuild()
        rebuilt = await asyncio.to_thread(dump, db)
    finally:
        db.dispose()
    checkpoints = "projection_checkpoints"
    verdict.scoring_differs = [
        f"{name}: {len(live.get(name, []))} rows live, {len(rows)} rebuilt"
        for name, rows in rebuilt.items()
        if name != checkpoints and live.get(name) != rows
    ] + checkpoints_ahead(live.get(checkpoints, []), rebuilt.get(checkpoints, []))


def checkpoints_ahead(live: Sequence[Any], rebuilt: Sequence[Any]) -> list[str]:
    """The streams where the live projection read past the rebuild: an error. A live
    checkpoint behind the rebuild's is not one: the live service is stopped as soon as every
    game's rows are caught up, so it may not have read a stream's last entries yet; whether
    those would change a row, the comparison of the other tables says."""
    rebuilt_at = {(projection, stream): last for projection, stream, last in rebuilt}
    return [
        f"projection_checkpoints: {stream} live at {last}, rebuilt at {rebuilt_at.get((p, stream))}"
        for p, stream, last in live
        if _stream_id(last) > _stream_id(rebuilt_at.get((p, stream), "0-0"))
    ]


def _stream_id(entry_id: str) -> tuple[int, int]:
    ms, _, seq = entry_id.partition("-")
    return int(ms), int(seq or 0)


async def scoring_caught_up(store: EventStore, sql_url: str, games: list[str]) -> bool:
    """Whether the scoring tables hold every game at its log's version."""
    from sqlalchemy import select

    from services.scoring.db import ScoredGame, table_of

    db = make_engine(sql_url)
    table = table_of(ScoredGame)
    try:
        with db.connect() as conn:
            scored = dict(conn.execute(select(table.c.game_id, table.c.version)).all())
    except Exception:
        return False
    finally:
        db.dispose()
    versions = [await store.version(g) for g in games]
    return all(scored.get(g) == v for g, v in zip(games, versions, strict=True) if v)


def median(values: Sequence[float]) -> float | None:
    return round(statistics.median(values), 2) if values else None
