"""CPU per command of the engine, the load generator and Redis under `caravel bench pipeline`.

Runs ``python -m services.cli bench pipeline --engines 1`` from a checkout (this one unless
``--tree``; another one, say ``git archive <commit> | tar -x -C /tmp/old``, to alternate
two versions in the same minutes) against the Redis of ``--redis-url``, and every 0.5 s
reads the CPU ticks of the engine process and of the load generator (``/proc/<pid>/stat``,
user + system), Redis' ``used_cpu_user + used_cpu_sys`` and its command counts. Over the
measured window (the run's last ``--seconds``, less a second at each end) it prints, as
JSON: the commands/s the pipeline answered, its latency, the CPU per command of each, and
the Redis calls per command (``fcall``: the engine's appends, ``xreadgroup``: its reads).

    python benchmarks/pipeline_cpu.py --rate 4000 --seconds 15 [--tree /tmp/old]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import redis

HZ = os.sysconf("SC_CLK_TCK")
CALLS = ("xreadgroup", "fcall", "evalsha", "xadd", "xread")


def _ticks(pid: int) -> tuple[int, int]:
    """A process' user and system CPU ticks so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]), int(fields[12])


def _child(pid: int) -> int | None:
    children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    return int(children[0]) if children else None


def _redis(client: redis.Redis) -> dict[str, float]:
    cpu: Any = client.info("cpu")
    stats: Any = client.info("commandstats")
    sample = {"cpu_s": cpu["used_cpu_user"] + cpu["used_cpu_sys"]}
    for name in CALLS:
        sample[name] = stats.get(f"cmdstat_{name}", {}).get("calls", 0)
    return sample


def run(tree: Path, url: str, rate: float, seconds: float, games: int) -> dict[str, Any]:
    command = [sys.executable, "-m", "services.cli", "bench", "pipeline", "--games", str(games)]
    command += ["--seconds", str(seconds), "--engines", "1", "--rate", str(rate), "--json"]
    env = {**os.environ, "PYTHONPATH": str(tree), "CARAVEL_REDIS_URL": url}
    client = redis.Redis.from_url(url)
    driver = subprocess.Popen(
        command, env=env, cwd=tree, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
    )
    engine = None
    while engine is None and driver.poll() is None:
        time.sleep(0.1)
        engine = _child(driver.pid)
    samples: list[tuple[float, tuple[int, int], tuple[int, int], dict[str, float]]] = []
    while driver.poll() is None and engine is not None:
        try:
            samples.append(
                (time.perf_counter(), _ticks(engine), _ticks(driver.pid), _redis(client))
            )
        except FileNotFoundError:  # the engine stopped: the run is over
            break
        time.sleep(0.5)
    out, _ = driver.communicate()
    figures = json.loads(out.decode().strip().splitlines()[-1])
    end = samples[-2][0]  # the last one may be after the engine stopped
    window = [s for s in samples if end - seconds + 1.0 <= s[0] <= end - 0.5]
    first, last = window[0], window[-1]
    span = last[0] - first[0]
    commands = figures["commands_per_second"] * span

    def us(ticks: float) -> float:
        return round(1e6 * ticks / HZ / commands, 1)

    return {
        "tree": str(tree),
        "rate": rate,
        "commands_per_second": figures["commands_per_second"],
        "latency_ms": figures["latency_ms"],
        "window_seconds": round(span, 1),
        "engine_cpu_us": us(sum(last[1]) - sum(first[1])),
        "engine_system_cpu_us": us(last[1][1] - first[1][1]),
        "load_generator_cpu_us": us(sum(last[2]) - sum(first[2])),
        "redis_cpu_us": round(1e6 * (last[3]["cpu_s"] - first[3]["cpu_s"]) / commands, 1),
        "redis_calls_per_command": {
            name: round((last[3][name] - first[3][name]) / commands, 3) for name in CALLS
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree", type=Path, default=Path(__file__).resolve().parent.parent)
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/8")
    parser.add_argument("--rate", type=float, default=4000)
    parser.add_argument("--seconds", type=float, default=15)
    parser.add_argument("--games", type=int, default=1000)
    args = parser.parse_args()
    print(json.dumps(run(args.tree, args.redis_url, args.rate, args.seconds, args.games)))


if __name__ == "__main__":
    main()
