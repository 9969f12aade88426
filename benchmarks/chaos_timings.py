"""The chaos benchmark's view of the first seconds after each cluster node kill
(``--timings``, issue 25): every HTTP request of the clients timed and put on its game's
shard, and each shard's events counted second by second around the kill.

The pooled events/s ratio swings with the drill's few games (a game ending or starting
moves it more than a kill); the requests' times say what a player on a healthy shard
waited, and the per-second counts show when each shard stopped and moved again.
"""

from __future__ import annotations

import bisect
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from .chaos_faults import Kill

# Windows of request start times, seconds from the kill: before it, then second by second.
WINDOWS: tuple[tuple[float, float], ...] = (
    (-6.0, -0.5),
    (0.0, 1.0),
    (1.0, 2.0),
    (2.0, 3.0),
    (3.0, 5.0),
    (5.0, 8.0),
)
SECONDS = (-3, 9)  # the per-second counts: from 3 s before a kill to 9 s after


@dataclass(frozen=True)
class Timed:
    """One HTTP request: when it was sent (``time.time()``), how long its answer took,
    what it was and the game (table) it was about (None: no game's)."""

    at: float
    seconds: float
    method: str
    route: str  # the path with its ids taken out: "/games/{id}/legal"
    game: str | None
    status: int  # 0: no answer (a transport error or timeout)


def route_of(path: str) -> tuple[str, str | None]:
    """The path's route and the game (table) it names, if any."""
    parts = path.split("?", 1)[0].split("/")
    if len(parts) > 2 and parts[1] in ("games", "tables") and parts[2]:
        return "/".join([*parts[:2], "{id}", *parts[3:]]), parts[2]
    return "/".join(parts), None


def _pcts(values: list[float]) -> dict[str, float | int | None]:
    if not values:
        return {"n": 0, "p50": None, "p90": None, "max": None}
    values = sorted(values)
    p90 = values[min(len(values) - 1, int(0.9 * len(values)))]
    return {
        "n": len(values),
        "p50": round(statistics.median(values), 3),
        "p90": round(p90, 3),
        "max": round(values[-1], 3),
    }


def request_windows(
    timed: Sequence[Timed], kills: Sequence[Kill], shard_of: Callable[[str], int]
) -> list[dict[str, Any]]:
    """Per cluster node kill and window: the requests of the healthy shards' games and of
    the hit shard's, their count and p50/p90/max seconds (by start time)."""
    ordered = sorted(timed, key=lambda t: t.at)
    starts = [t.at for t in ordered]
    rows = []
    for kill in kills:
        if kill.shard is None:
            continue
        row: dict[str, Any] = {"kind": kill.kind, "shard": kill.shard, "at": kill.at}
        for low, high in WINDOWS:
            i = bisect.bisect_left(starts, kill.at + low)
            j = bisect.bisect_left(starts, kill.at + high)
            healthy, hit = [], []
            for t in ordered[i:j]:
                if t.game is None:
                    continue
                (hit if shard_of(t.game) == kill.shard else healthy).append(t.seconds)
            row[f"{low:g}..{high:g}"] = {"healthy": _pcts(healthy), "hit": _pcts(hit)}
        rows.append(row)
    return rows


def pooled_requests(
    timed: Sequence[Timed], kills: Sequence[Kill], shard_of: Callable[[str], int], kind: str
) -> dict[str, dict[str, Any]]:
    """Every request of every kill of ``kind`` in each window, pooled: healthy and hit."""
    ordered = sorted(timed, key=lambda t: t.at)
    starts = [t.at for t in ordered]
    pooled: dict[str, dict[str, list[float]]] = {}
    for kill in kills:
        if kill.kind != kind or kill.shard is None:
            continue
        for low, high in WINDOWS:
            cell = pooled.setdefault(f"{low:g}..{high:g}", {"healthy": [], "hit": []})
            i = bisect.bisect_left(starts, kill.at + low)
            j = bisect.bisect_left(starts, kill.at + high)
            for t in ordered[i:j]:
                if t.game is not None:
                    side = "hit" if shard_of(t.game) == kill.shard else "healthy"
                    cell[side].append(t.seconds)
    return {w: {s: _pcts(v) for s, v in sides.items()} for w, sides in pooled.items()}


def _median(values: list[float]) -> float | None:
    return round(statistics.median(values), 3) if values else None


def seconds_around(
    times: dict[int, list[float]], kills: Sequence[Kill], shards: int
) -> list[dict[str, Any]]:
    """Per cluster node kill: each shard's events in each second from ``SECONDS[0]`` to
    ``SECONDS[1]`` around it (``times``: each shard's event times, sorted)."""
    rows = []
    for kill in kills:
        if kill.shard is None:
            continue
        counts = {}
        for shard in range(shards):
            found = times.get(shard, [])
            counts[shard] = [
                bisect.bisect_left(found, kill.at + s + 1) - bisect.bisect_left(found, kill.at + s)
                for s in range(*SECONDS)
            ]
        rows.append({"kind": kill.kind, "shard": kill.shard, "at": kill.at, "counts": counts})
    return rows


def lines(report: Any) -> list[str]:
    """The timings as text after the drill's table."""
    out: list[str] = []
    for kind, windows in report.request_windows_pooled.items():
        out.append(f"\n{kind} kills: HTTP requests by start time from the kill, all kills pooled")
        out.append("| window s | healthy n, p50 / p90 / max s | hit shard n, p50 / p90 / max s |")
        out.append("|---|---|---|")
        for name, sides in windows.items():
            h, x = sides["healthy"], sides["hit"]
            out.append(
                f"| {name} | {h['n']}, {h['p50']} / {h['p90']} / {h['max']} "
                f"| {x['n']}, {x['p50']} / {x['p90']} / {x['max']} |"
            )
    if report.seconds_around:
        low, high = SECONDS
        out.append(f"\nevents per second by shard, {low} to {high - 1} s from each kill (* hit)")
        for row in report.seconds_around:
            cells = " ; ".join(
                f"{'*' if int(s) == row['shard'] else ''}{s}: {' '.join(map(str, c))}"
                for s, c in row["counts"].items()
            )
            out.append(f"- {row['kind']} at {row['at']:.1f}: {cells}")
    return out
