"""Where each master kill's seconds went, from a chaos run's Redis logs (issue 25).

    python -m benchmarks.chaos_phases RUN.json:LOGS [RUN.json:LOGS ...]

Each ``RUN.json`` is a ``benchmarks.chaos --json`` report and ``LOGS`` its ``--logs`` folder
(run with ``--redis cluster``). The nodes' ``redis-*.log`` are merged by their millisecond
timestamps and read against each master kill's time; per kill, seconds after it:

- *fail*: "Marking node … as failing (quorum reached)" (the node timeout, then the reports);
- *won*: "Failover election won" (Redis's election delay, 0.5-1 s, then the votes);
- *restart*: the killed node's "Ready to accept connections" (the harness restarts it);
- *psync*: a replica's "Successful partial resynchronization" (3+6: the sibling follows the
  promoted replica); *loaded*: a replica's "MASTER <-> REPLICA sync: Finished with success";
- *writable*: when the new master counts a replica again (``min-replicas-to-write 1``):
  *psync* if it came first, else *loaded*;
- the harness's own ``failover_s``, ``healthy_s`` and the hit shard's first event
  ``moves_s``.

Prints one line per kill and the medians and maxima over all the runs given.
"""

from __future__ import annotations

import json
import re
import statistics
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

LINE = re.compile(r"^\d+:[A-Z] (\d+ \w+ \d+ [\d:.]+) . (.*)$")
WINDOW_S = 15.0  # a kill's phases are looked for this long after it
PHASES = {
    "fail": ("as failing (quorum reached)", 0.0),
    "won": ("Failover election won", 0.0),
    "restart": ("Ready to accept connections", 0.5),  # not a node's first start
    "psync": ("Successful partial resynchronization", 0.0),
    "loaded": ("MASTER <-> REPLICA sync: Finished with success", 0.5),
}
COLUMNS = [*PHASES, "writable", "failover_s", "healthy_s", "moves_s"]


def redis_lines(logs: Path) -> list[tuple[float, str]]:
    """Every node's log lines as (time.time(), message), in order."""
    out = []
    for path in logs.glob("redis-*.log"):
        for line in path.read_text(errors="replace").splitlines():
            found = LINE.match(line.strip())
            if found:
                when = datetime.strptime(found[1], "%d %b %Y %H:%M:%S.%f").replace(tzinfo=UTC)
                out.append((when.timestamp(), found[2]))
    return sorted(out)


def first(lines: list[tuple[float, str]], at: float, text: str, after_s: float) -> float | None:
    """Seconds from ``at`` to the first line holding ``text`` at least ``after_s`` later."""
    for when, message in lines:
        if at + after_s <= when <= at + WINDOW_S and text in message:
            return round(when - at, 2)
    return None


def kill_phases(report: dict[str, Any], lines: list[tuple[float, str]]) -> list[dict[str, Any]]:
    """Each master kill's phases (None: not seen)."""
    rows = []
    for kill in report["kill_phases"]:
        if kill["kind"] != "master":
            continue
        row: dict[str, Any] = {k: first(lines, kill["at"], t, s) for k, (t, s) in PHASES.items()}
        psync, loaded = row["psync"], row["loaded"]
        row["writable"] = psync if psync is not None and psync < (loaded or WINDOW_S) else loaded
        row.update({k: kill.get(k) for k in ("failover_s", "healthy_s", "moves_s")})
        rows.append(row)
    return rows


def main() -> None:
    rows = []
    for arg in sys.argv[1:]:
        report_path, _, logs = arg.partition(":")
        report = json.loads(Path(report_path).read_text())
        rows += kill_phases(report, redis_lines(Path(logs)))
    print(" ".join(f"{c:>10}" for c in COLUMNS))
    for row in rows:
        print(" ".join(f"{'-' if row[c] is None else row[c]:>10}" for c in COLUMNS))
    for column in COLUMNS:
        seen = [row[column] for row in rows if row[column] is not None]
        if seen:
            median = statistics.median(seen)
            print(f"{column}: median {median:.2f}, max {max(seen):.2f}, n {len(seen)}")


if __name__ == "__main__":
    main()
