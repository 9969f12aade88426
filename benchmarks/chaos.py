"""Chaos benchmark: human-like clients and bot tables play while services and Redis are
killed at random; then every log, answer and projection is checked.

    python -m benchmarks.chaos --redis single|cluster \\
        --kill engine,redis,master,replica,lobby,ai,scoring --minutes M [--interval S]
        [--quiet S] [--humans 6] [--bot-tables 6] [--no-durability] [--replicas 1|2]
        [--database-url URL] [--json FILE] [--logs DIR] [--timings]

Starts its own Redis from the machine's ``redis-server`` 7 (one server with AOF on a free
port, killed with ``kill -9`` and started again on its files; or the local 3+3 cluster of
``tests/cluster.py``, a master or a replica killed, failed over and started again; 3+6 with
``--replicas 2``; on the cluster durability is on unless ``--no-durability``:
``min-replicas-to-write 1`` and ``CARAVEL_DURABILITY_REPLICAS=1``), and the services as
processes of their own: two engines, two lobbies on one port, two bot players and scoring,
on a SQLite file (or a PostgreSQL schema of their own with ``--database-url``). Every
``--interval`` seconds (on average) it ``kill -9``s one of the ``--kill`` kinds, round-robin
(a kind killed least so far, waited for until it is ready: every kind is killed as often),
starting it again a moment later (a service kind is killed again only ``--recover`` seconds
after its new process serves: on a loaded machine a service takes many seconds to start, and
killed at a fixed pace it never served). Every port it gives a process is below the kernel's
ephemeral range, so a process started again finds its port free. After ``--minutes`` the
kills stop, the players finish their games (at most ``--settle`` seconds), and it checks:

- every log gap-free, replaying to its recorded final hash, each command's events decided
  again by the rules; event ids unique; no command's events twice in a log;
- every command a client had acknowledged (200) once in its log, at the version answered
  (else *lost*), and every refusal justified (else *wrongly refused*);
- no game stuck (every one over or still moving at the end) and no table stuck (started but
  ``open``, or ``running`` without a game); no HTTP 5xx but 503;
- the scoring tables equal to a rebuild from the logs (``caravel projections rebuild``);
- no process whose service loop died (*dead loops*: every process's ``/livez`` asked every
  2 s through the run and at its end, a 503 naming the loops; a process that exited though
  not killed, its last log line naming them, noted before a kill or restart hides it);
- on the cluster: the other shards' events/s while a master or replica is down against
  before, and how soon the hit shard's games move again.

Target (a), the other shards' events/s while a node is down, is read as their games'
events **per game-second alive** against the quiet seconds before the kill, pooled over the
kills (events over game-seconds: a kill weighs by its seconds), with a 90% bootstrap
interval over the kills (``chaos_checks.LiveGames``, ``pooled_live_interval``). The shards'
plain events/s are printed too, but they count how many games a shard holds as much as how
fast they go: with 8 tables over 3 shards a shard holds two or three games; a bot game runs
at the machine's pace (a few hundred events a second) for a few seconds, then its client
looks every 2 s whether it is over before opening the next; and a closed loop opens its
next tables on a random shard, a third of them on the hit one, where they wait out the
failover. One game starting or ending in a four-second window moved a shard's total more
than the kill did (0.0 at one kill, 1.2 at the next, in the same run). Per game-second
alive, only the pace of the games that are there counts; and the interval (0.74-0.96 around
0.85 in one ten-kill run) says how far a run's figure must be from 0.9 to mean anything:
more kills (``--minutes``) narrow it, more tables (``--bot-tables``) would mostly load the
machine more (each bot table plays as fast as the CPU lets it).

Prints a table (``--json FILE``: the whole report there too, with the cluster's events per
second shard by shard; ``--logs DIR``: every process's log kept there). ``--timings`` (on
the cluster) also times every HTTP request of the clients and prints, per window of
seconds from each node kill, the healthy shards' and the hit shard's requests (n, p50,
p90, max), and each shard's events second by second around each kill
(``chaos_timings``; every request in ``--json``). Every process it
started is stopped, also on failure; the shared Redis is never touched.
``tests/test_chaos.py`` runs it briefly on one Redis, in the default test run.
"""

from __future__ import annotations

import argparse
import asyncio
import bisect
import contextlib
import json
import random
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import httpx

from services.capacity import server_env
from shared.bus import BODY, Keys, connect
from shared.contracts import DeadLetter
from shared.eventstore import EventStore
from shared.settings import Settings
from tests.cluster import LocalCluster, _free_ports, redis_server

from .chaos_checks import (
    LiveGames,
    Progress,
    ShardFigures,
    Verdict,
    check_logs,
    live_games,
    median,
    pooled_live,
    pooled_live_interval,
    pooled_ratio,
    sample,
    scoring_caught_up,
    scoring_equals_rebuild,
    shard_figures,
    stuck_games,
)
from .chaos_faults import (
    CLUSTER_KINDS,
    SERVICE_KINDS,
    SINGLE_KINDS,
    START_S,
    Killer,
    Services,
    SingleRedis,
    shard_of_game,
    shard_ranges,
)
from .chaos_load import Http, Tally, bot_tables, human
from .chaos_timings import Timed, pooled_requests, request_windows, seconds_around
from .chaos_timings import lines as timing_lines
from .scratch import postgres_schema

# Past the reconciler's retry: its rounds (every second) and the start sent again.
STARTS_SEEN_THROUGH_S = 15.0
WITHOUT_A_GAME = " running without a game"
ALL_KINDS = ("engine", "redis", "master", "replica", "lobby", "ai", "scoring")


@dataclass
class Options:
    redis: str = "single"
    kill: tuple[str, ...] = ALL_KINDS
    minutes: float = 1.0
    interval_s: float = 2.0
    recover_s: float = 2.0  # a service's kind is not killed again this long after it serves
    quiet_s: float = 0.0  # no Redis kill this long after a Redis fault ends (Killer.quiet_s)
    humans: int = 6
    bot_tables: int = 6
    think: tuple[float, float] = (0.05, 0.3)
    settle_s: float = 120.0
    still_s: float = 20.0  # a game that has not moved this long at the end is stuck
    durability: bool = True  # cluster only
    replicas: int = 1  # cluster only: each master's replicas (2: the promoted one still has one)
    fsync: str = "everysec"  # one Redis: its appendfsync (always: nothing acknowledged is lost)
    database_url: str | None = None
    logs: Path | None = None  # where to keep the processes' logs (else deleted)
    log_level: str = "WARNING"  # the services' CARAVEL_LOG_LEVEL
    timings: bool = False  # every HTTP request timed, by shard around each node kill


@dataclass
class Report:
    options: Options
    kills: dict[str, int] = field(default_factory=dict)
    redis_back_s: dict[str, float | None] = field(default_factory=dict)  # median per kind
    drill_errors: list[str] = field(default_factory=list)
    exited: list[str] = field(default_factory=list)  # processes that died unkilled
    dead_loops: list[str] = field(default_factory=list)  # "process: loops" (Services.dead)
    acked: int = 0
    duplicates_answered: int = 0
    refused: int = 0
    unanswered: int = 0
    setup_refused: list[str] = field(default_factory=list)
    requests: int = 0
    http_503: int = 0
    http_5xx: list[str] = field(default_factory=list)
    scoring_caught_up: bool = False
    # Entries some group gave up on (``GroupConsumer.dead_letter``): work a fault dropped,
    # a bot's command among them stops its game for good ("group stream: reason: body").
    dead_letters: list[str] = field(default_factory=list)
    verdict: Verdict = field(default_factory=Verdict)
    shards: list[ShardFigures] = field(default_factory=list)
    # The same from the events of one kind of table only ("bot": tables of bots; "human":
    # a human's tables, a bot in the other seat): which players' moves stop at a kill.
    shards_by_table: dict[str, list[ShardFigures]] = field(default_factory=dict)
    # The other shards' games' pace per game-second alive, all games and by table kind
    # (``chaos_checks.LiveGames``: without the tables the closed loop moves onto the hit shard).
    live: dict[str, list[LiveGames]] = field(default_factory=dict)
    # The cluster's events per second, shard by shard, from the first event on; and each
    # Redis kill's second in it, kind and shard (in --json only).
    timeline: dict[int, list[int]] = field(default_factory=dict)
    redis_kills: list[tuple[int, str, int | None]] = field(default_factory=list)
    # Each node kill's phases (``Killer.phases``) and the hit shard's first event after it.
    kill_phases: list[dict[str, Any]] = field(default_factory=list)
    # With --timings (``chaos_timings``): per node kill, the healthy shards' and the hit
    # shard's HTTP requests by window from the kill, the same pooled per kind, and each
    # shard's events second by second around the kill.
    request_windows: list[dict[str, Any]] = field(default_factory=list)
    request_windows_pooled: dict[str, dict[str, Any]] = field(default_factory=dict)
    seconds_around: list[dict[str, Any]] = field(default_factory=list)
    timed: list[Timed] = field(default_factory=list)  # every request (--json only)
    shard_starts: list[int] = field(default_factory=list)  # each shard's first slot
    seconds: float = 0.0

    def failures(self) -> dict[str, int]:
        """What must be zero."""
        v = self.verdict
        return {
            "lost": len(v.lost) + self.unanswered,
            "duplicated": len(v.duplicated_commands) + v.duplicate_event_ids,
            "wrongly refused": len(v.wrongly_refused) + len(self.setup_refused),
            "stuck": len(v.stuck_games) + len(v.stuck_tables),
            "HTTP 5xx (not 503)": len(self.http_5xx),
            "gaps": len(v.gaps),
            "replay mismatches": len(v.replay_mismatches),
            "scoring differs": len(v.scoring_differs) + (not self.scoring_caught_up),
            "processes exited": len(self.exited),
            "dead loops": len(self.dead_loops),
            "dead letters": len(self.dead_letters),
            "failed drills": len(self.drill_errors),
        }


def kinds_for(options: Options) -> list[str]:
    skip = CLUSTER_KINDS if options.redis == "single" else SINGLE_KINDS
    return [k for k in options.kill if k not in skip]


@contextlib.contextmanager
def backend(options: Options, server: str) -> Iterator[tuple[str, SingleRedis | None, Any]]:
    """The run's own Redis: its URL, and the single server or the cluster."""
    if options.redis == "single":
        single = SingleRedis(server, appendfsync=options.fsync).start()
        try:
            yield single.url, single, None
        finally:
            if options.logs is not None and (single.folder / "redis.log").exists():
                shutil.copy(single.folder / "redis.log", options.logs / "redis.log")
            single.stop(keep=None if options.logs is None else options.logs / "redis-data")
        return
    extra = ("--min-replicas-to-write", "1") if options.durability else ()
    cluster = LocalCluster(server, replicas=options.replicas, options=extra)
    try:
        cluster.start()
        yield cluster.url, None, cluster
    finally:
        if options.logs is not None:
            for log in cluster.folder.glob("*/redis.log"):
                shutil.copy(log, options.logs / f"redis-{log.parent.name}.log")
        cluster.stop()


async def run(options: Options) -> Report:
    """One chaos run, from the first process started to the last one stopped."""
    server = redis_server()
    if server is None:
        raise RuntimeError("needs redis-server 7 or later (Debian's /usr/bin/redis-server)")
    started = time.monotonic()
    if options.logs is not None:
        options.logs.mkdir(parents=True, exist_ok=True)
    folder = Path(tempfile.mkdtemp(prefix="caravel-chaos-"))
    port = _free_ports(1)[0]  # as every port it hands out: one a restart finds free
    env = server_env(port, "cvchaos", http_share_port="true", secret="chaos-" + "s" * 32)
    env["CARAVEL_DATA_DIR"] = str(folder / "data")
    env["CARAVEL_LOG_LEVEL"] = options.log_level
    try:
        with contextlib.ExitStack() as held:
            url, single, cluster = held.enter_context(backend(options, server))
            sql = (
                held.enter_context(postgres_schema(options.database_url))
                if options.database_url
                else f"sqlite:///{folder / 'caravel.db'}"
            )
            env.update(CARAVEL_REDIS_URL=url, CARAVEL_DATABASE_URL=sql)
            if cluster is not None and options.durability:
                env["CARAVEL_DURABILITY_REPLICAS"] = "1"
            services = Services(env, folder)
            report = Report(options)
            try:
                services.start_all()
                keys = Keys(env["CARAVEL_KEY_PREFIX"], 64)
                kinds = kinds_for(options)
                pace = (options.interval_s, options.recover_s, options.quiet_s)
                killer = Killer(kinds, services, single, cluster, *pace)
                await _drive(options, port, keys, url, sql, services, killer, report)
            finally:
                services.stop()
    finally:
        if options.logs is not None:
            for log in [*folder.glob("*.log"), *folder.glob("caravel.db")]:
                shutil.copy(log, options.logs / log.name)
        shutil.rmtree(folder, ignore_errors=True)
    report.seconds = round(time.monotonic() - started, 1)
    return report


async def _drive(
    options: Options,
    port: int,
    keys: Keys,
    url: str,
    sql: str,
    services: Services,
    killer: Killer,
    report: Report,
) -> None:
    redis: Any = connect(url)
    store = EventStore(redis, keys)
    tally, progress = Tally(timed=[] if options.timings else None), Progress()
    starts = shard_ranges(killer.cluster) if killer.cluster else []

    def shard_of(game: str) -> int:
        return shard_of_game(starts, keys, game) if starts else 0

    stop_new, stop_kills, stop_sampling = asyncio.Event(), asyncio.Event(), asyncio.Event()
    limits = httpx.Limits(max_connections=4 * (options.humans + options.bot_tables) + 10)
    base = f"http://127.0.0.1:{port}"
    try:
        async with httpx.AsyncClient(base_url=base, timeout=30, limits=limits) as client:
            http = Http(client, tally)
            await _ready(client)
            players = [
                asyncio.create_task(human(http, random.Random(i), options.think, stop_new))
                for i in range(options.humans)
            ] + [asyncio.create_task(bot_tables(http, stop_new)) for _ in range(options.bot_tables)]
            sampler = asyncio.create_task(
                sample(store, tally.games, shard_of, progress, stop_sampling)
            )
            killing = asyncio.create_task(killer.run(stop_kills))
            stop_watching = asyncio.Event()
            watching = asyncio.create_task(services.watch(base, stop_watching))
            await asyncio.sleep(options.minutes * 60)
            stop_kills.set()
            stop_new.set()
            await killing
            report.exited = _restart_exited(services, killer)
            await asyncio.wait(players, timeout=options.settle_s)
            over = set(await store.over(tally.games))  # the players still play theirs
            stuck = stuck_games(progress, over, options.still_s)
            report.verdict.stuck_games = [
                f"{await _pending(http, g)} ({'bots' if g in tally.bot_games else 'human seat 0'})"
                for g in stuck
            ]
            for task in players:
                task.cancel()
            await asyncio.gather(*players, return_exceptions=True)
            await _stuck_tables(http, store, tally, report.verdict)
            stop_sampling.set()
            await sampler
            stop_watching.set()
            await watching  # its last look: every process at the end
        services.stop(("lobby", "ai"))
        report.scoring_caught_up = await _scoring_catches_up(store, sql, tally.games)
        services.stop(("scoring", "engine"))
        logs = await check_logs(store, tally, report.verdict)
        await scoring_equals_rebuild(store, sql, report.verdict)
        report.dead_letters = await _dead_letters(redis, keys)
    finally:
        await redis.aclose()
    _fill(report, killer, tally)
    if killer.cluster is not None:
        times: dict[int, list[float]] = {}
        by_table: dict[str, dict[int, list[float]]] = {"bot": {}, "human": {}}
        for game, events in logs.items():
            at = [e.recorded_at.timestamp() for e in events]
            times.setdefault(shard_of(game), []).extend(at)
            table = "bot" if game in tally.bot_games else "human"
            by_table[table].setdefault(shard_of(game), []).extend(at)
        for found in [*times.values(), *(t for b in by_table.values() for t in b.values())]:
            found.sort()
        healthy = [p.get("healthy_s") for p in killer.phases]
        report.shards = shard_figures(times, killer.kills, len(starts), healthy_s=healthy)
        for table, found_times in by_table.items():
            report.shards_by_table[table] = shard_figures(
                found_times, killer.kills, len(starts), healthy_s=healthy
            )
        games = {
            g: (shard_of(g), sorted(e.recorded_at.timestamp() for e in ev))
            for g, ev in logs.items()
        }
        report.live["all"] = live_games(list(games.values()), killer.kills, report.shards)
        for table in ("bot", "human"):
            kept = [v for g, v in games.items() if (g in tally.bot_games) == (table == "bot")]
            report.live[table] = live_games(kept, killer.kills, report.shards)
        _timeline(report, times, killer, by_table)
        if tally.timed is not None:
            _timings(report, tally.timed, times, killer, shard_of, len(starts))


def _timings(
    report: Report,
    timed: list[Timed],
    times: dict[int, list[float]],
    killer: Killer,
    shard_of: Callable[[str], int],
    shards: int,
) -> None:
    report.request_windows = request_windows(timed, killer.kills, shard_of)
    for kind in sorted({k.kind for k in killer.kills if k.shard is not None}):
        report.request_windows_pooled[kind] = pooled_requests(timed, killer.kills, shard_of, kind)
    report.seconds_around = seconds_around(times, killer.kills, shards)
    report.timed = timed
    report.shard_starts = killer.starts


def _timeline(
    report: Report,
    times: dict[int, list[float]],
    killer: Killer,
    by_table: dict[str, dict[int, list[float]]],
) -> None:
    first = min((t[0] for t in times.values() if t), default=0.0)
    for shard, found in sorted(times.items()):
        counts = report.timeline.setdefault(shard, [])
        for t in found:
            second = int(t - first)
            counts.extend([0] * (second + 1 - len(counts)))
            counts[second] += 1
    report.redis_kills = [
        (int(k.at - first), k.kind, k.shard) for k in killer.kills if k.shard is not None
    ]
    for phases in killer.phases:
        moved = _first_after(times.get(phases["shard"], []), phases["at"])
        by_kind = {
            f"moves_{table}_s": _first_after(found.get(phases["shard"], []), phases["at"])
            for table, found in by_table.items()
        }  # which tables' games move first: a bot's request or a human's retry
        report.kill_phases.append({**phases, "moves_s": moved, **by_kind})


def _first_after(times: list[float], at: float) -> float | None:
    """Seconds from ``at`` to the first of the sorted ``times`` after it."""
    i = bisect.bisect_right(times, at)
    return round(times[i] - at, 2) if i < len(times) else None


async def _pending(http: Http, game: str) -> str:
    """A stuck game, and whose decision it waits for (its spectator's view)."""
    answer = await http.call("GET", f"/games/{game}/view")
    if answer is None or answer.status_code != 200:
        return f"{game}: view {answer and answer.status_code}"
    view = answer.json()
    return f"{game} at {view.get('version')}, pending {view.get('pending')}"


def _restart_exited(services: Services, killer: Killer) -> list[str]:
    """Processes that died though not killed (after the kills, every one should run)."""
    exited = []
    for (kind, i), process in services.processes.items():
        services.check_exit(kind, i)  # a loop that died, named before the restart
        if process.poll() is not None:
            exited.append(f"{kind}-{i} exited {process.returncode}")
            services.start(kind, i)
    return exited


async def _ready(client: httpx.AsyncClient, timeout_s: float = START_S) -> None:
    give_up = time.monotonic() + timeout_s
    while time.monotonic() < give_up:
        with contextlib.suppress(httpx.TransportError):
            if (await client.get("/readyz")).status_code == 200:
                return
        await asyncio.sleep(0.2)
    raise TimeoutError("the lobby never got ready")


async def _dead_letters(redis: Any, keys: Keys) -> list[str]:
    """Every partition's dead letters: the group, the stream, why, and the entry's body."""
    found = []
    for p in keys.all_partitions():
        for _, fields in await redis.xrange(keys.dead_letters(p)):
            record = DeadLetter.model_validate_json(fields[BODY])
            body = json.loads(record.fields).get(BODY.decode(), "")[:240]
            found.append(f"{record.group} {record.stream}: {record.reason}: {body}")
    return found


async def _stuck_tables(http: Http, store: EventStore, tally: Tally, verdict: Verdict) -> None:
    """Tables started but still ``open``, or ``running`` without a game once the lobby's
    reconciler has had its time. A start that failed on the way (a lobby or Redis killed
    under it) leaves its table ``running`` with the start unfinished, and the reconciler
    sends it again ``CARAVEL_START_RETRY_S`` later; a table whose game Redis lost after
    its start was done (a Redis killed without AOF) has its game started again by the
    lobby's next look for lost games, every ``CARAVEL_LOST_GAME_CHECK_S``: such a table is
    stuck only if it still has no game after the longer of the two and a few of the
    reconciler's rounds."""
    fields = Settings.model_fields  # the services run with their defaults
    retry_s = max(fields["start_retry_s"].default, fields["lost_game_check_s"].default)
    give_up = time.monotonic() + retry_s + STARTS_SEEN_THROUGH_S
    first: set[str] | None = None
    while True:
        stuck = await _tables_without_games(http, store, tally)
        gameless = {s for s in stuck if s.endswith(WITHOUT_A_GAME)}
        first = gameless if first is None else first
        if not gameless or time.monotonic() >= give_up:
            verdict.stuck_tables = stuck
            verdict.started_late = sorted(t.removesuffix(WITHOUT_A_GAME) for t in first - gameless)
            return
        await asyncio.sleep(1)


async def _tables_without_games(http: Http, store: EventStore, tally: Tally) -> list[str]:
    stuck = []
    for status in ("open", "running"):
        answer = await http.call("GET", f"/tables?status={status}")
        if answer is None or answer.status_code != 200:
            stuck.append(f"GET /tables?status={status} unanswered")
            continue
        for table in answer.json():
            if status == "open" and table["id"] in tally.started:
                stuck.append(f"{table['id']} open after its start: {table.get('start_error')}")
            elif status == "running" and not await store.exists(table["id"]):
                stuck.append(f"{table['id']}{WITHOUT_A_GAME}")
    return stuck


async def _scoring_catches_up(store: EventStore, sql: str, games: list[str]) -> bool:
    give_up = time.monotonic() + 90
    while time.monotonic() < give_up:
        if await scoring_caught_up(store, sql, games):
            return True
        await asyncio.sleep(1)
    return False


def _fill(report: Report, killer: Killer, tally: Tally) -> None:
    report.kills = dict(sorted(killer.counts().items()))
    report.redis_back_s = {k: median(v) for k, v in killer.recoveries.items()}
    report.drill_errors = killer.errors
    report.dead_loops = [f"{process}: {said}" for process, said in killer.services.dead.items()]
    report.acked = len(tally.acked)
    report.duplicates_answered = sum(a.status == "duplicate" for a in tally.acked)
    report.refused = len(tally.refused)
    report.unanswered = len(tally.unanswered)
    report.setup_refused = tally.setup_refused
    report.requests = tally.requests
    report.http_503 = tally.unavailable
    report.http_5xx = tally.server_errors


def table(report: Report) -> str:
    """The report as a Markdown table, and the findings after it."""
    o, v = report.options, report.verdict
    durability = "on" if o.redis == "cluster" and o.durability else "off"
    fsync = f", appendfsync {o.fsync}" if o.redis == "single" else ""
    rows = [
        ("redis", f"{o.redis} (durability {durability}{fsync})"),
        ("minutes of kills / whole run s", f"{o.minutes} / {report.seconds}"),
        ("kills", ", ".join(f"{k} {n}" for k, n in report.kills.items()) or "none"),
        ("back after a kill (median s; services: from start)", json.dumps(report.redis_back_s)),
        ("games / events / finished", f"{v.games} / {v.events} / {v.finished}"),
        ("HTTP requests / 503s", f"{report.requests} / {report.http_503}"),
        (
            "commands acked (of them duplicate answers)",
            f"{report.acked} ({report.duplicates_answered})",
        ),
        ("refusals (all justified unless below)", str(report.refused)),
        ("tables whose start (or lost game) the reconciler saw through", str(len(v.started_late))),
    ]
    rows += [(name, str(n)) for name, n in report.failures().items()]
    if report.shards:
        for kind in CLUSTER_KINDS:
            found = [s for s in report.shards if s.kind == kind]
            if not found:
                continue
            ratios = sorted(s.others_ratio for s in found)
            back = [s.hit_answers_again_s for s in found if s.hit_answers_again_s is not None]
            rows.append(
                (
                    f"{kind} kills: other shards' events/s vs before",
                    f"median {median(ratios)}, min {ratios[0]}, "
                    f">=0.9 in {sum(r >= 0.9 for r in ratios)}/{len(ratios)}",
                )
            )
            quiet = sorted(r for s in found if (r := s.quiet_ratio) is not None)
            rows.append(
                (
                    f"{kind} kills: other shards' events/s vs the quiet seconds before",
                    f"median {median(quiet)}, >=0.9 in {sum(r >= 0.9 for r in quiet)}/"
                    f"{len(quiet)} (no quiet baseline: {len(found) - len(quiet)}), "
                    f"pooled {pooled_ratio(found)}",
                )
            )
            for tables, figures in report.shards_by_table.items():
                rows.append(
                    (
                        f"{kind} kills: other shards' events/s vs the quiet seconds before, "
                        f"{tables} tables' events only",
                        f"pooled {pooled_ratio([s for s in figures if s.kind == kind])}",
                    )
                )
            for tables, live in report.live.items():
                mine = [f for f in live if f.kind == kind]
                ratios = sorted(r for f in mine if (r := f.ratio) is not None)
                interval = pooled_live_interval(mine)
                spread = "" if interval is None else " (90% over kills {}-{})".format(*interval)
                rows.append(
                    (
                        f"{kind} kills: other shards' games' events per game-second alive vs "
                        f"the quiet seconds before, {tables} games (target (a))",
                        f"median {median(ratios)}, >=0.9 in {sum(r >= 0.9 for r in ratios)}/"
                        f"{len(ratios)}, pooled {pooled_live(mine)}{spread}",
                    )
                )
            rows.append(
                (
                    f"{kind} kills: hit shard moves again (s)",
                    f"median {median(back)}, max {max(back, default=None)}, "
                    f"never {len(found) - len(back)}",
                )
            )
    lines = ["| figure | value |", "|---|---|"] + [f"| {a} | {b} |" for a, b in rows]
    findings = {
        "lost": v.lost,
        "duplicated": v.duplicated_commands,
        "wrongly refused": v.wrongly_refused + report.setup_refused,
        "stuck games": v.stuck_games,
        "stuck tables": v.stuck_tables,
        "HTTP 5xx": report.http_5xx,
        "gaps": v.gaps,
        "replay": v.replay_mismatches,
        "scoring": v.scoring_differs,
        "exited": report.exited,
        "dead loops": report.dead_loops,
        "dead letters": report.dead_letters,
        "drills": report.drill_errors,
    }
    for name, items in findings.items():
        for item in items[:10]:
            lines.append(f"- {name}: {item}")
    return "\n".join(lines + timing_lines(report))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--redis", choices=("single", "cluster"), default="single")
    parser.add_argument("--kill", default=",".join(ALL_KINDS))
    parser.add_argument("--minutes", type=float, default=1.0)
    parser.add_argument("--interval", type=float, default=2.0, help="mean seconds between kills")
    parser.add_argument(
        "--recover", type=float, default=2.0, help="s from serving to a kind's next kill"
    )
    parser.add_argument(
        "--quiet", type=float, default=0.0, help="s from a Redis fault's end to the next"
    )
    parser.add_argument("--humans", type=int, default=6)
    parser.add_argument("--bot-tables", type=int, default=6)
    parser.add_argument("--settle", type=float, default=120.0)
    parser.add_argument("--no-durability", action="store_true")
    parser.add_argument(
        "--replicas", type=int, default=1, help="cluster: replicas a master (2: 3+6 nodes)"
    )
    parser.add_argument(
        "--fsync",
        choices=("everysec", "always"),
        default="everysec",
        help="one Redis: appendfsync (everysec may lose up to 2 s of acknowledged writes)",
    )
    parser.add_argument("--database-url", default=None)
    parser.add_argument("--logs", type=Path, default=None, help="keep the processes' logs here")
    parser.add_argument("--log-level", default="WARNING", help="the services' log level")
    parser.add_argument(
        "--timings",
        action="store_true",
        help="cluster: time every HTTP request and count events per second, by shard, "
        "around each node kill",
    )
    parser.add_argument("--json", type=Path, default=None, help="also write the report here")
    args = parser.parse_args()
    kinds = tuple(k for k in args.kill.split(",") if k)
    unknown = set(kinds) - set(ALL_KINDS)
    if unknown:
        parser.error(f"unknown kinds {sorted(unknown)}; known: {','.join(ALL_KINDS)}")
    options = Options(
        redis=args.redis,
        kill=kinds,
        minutes=args.minutes,
        interval_s=args.interval,
        recover_s=args.recover,
        quiet_s=args.quiet,
        humans=args.humans,
        bot_tables=args.bot_tables,
        settle_s=args.settle,
        durability=not args.no_durability,
        replicas=args.replicas,
        fsync=args.fsync,
        database_url=args.database_url,
        logs=args.logs,
        log_level=args.log_level,
        timings=args.timings,
    )
    report = asyncio.run(run(options))
    if args.json is not None:
        args.json.write_text(json.dumps(asdict(report), indent=1, default=str))
    print(table(report))


assert set(SERVICE_KINDS) | set(SINGLE_KINDS) | set(CLUSTER_KINDS) == set(ALL_KINDS)

if __name__ == "__main__":
    main()
