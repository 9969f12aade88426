"""Benchmark: what each Caravel process spends beside its work (issues 24 and 25): the
cyclic garbage collector's share of its CPU under load, and the CPU of a start (imports
included) until it serves.

    python benchmarks/process_costs.py load [--old TREE] [--untuned] [--cycles]
        [--rounds 2] [--tables 20] [--seconds 12] [--processes 2]
    python benchmarks/process_costs.py start [--old TREE] [--rounds 3]
        [--parts engine,ai,scoring,views engine lobby] [--redis-url URL]

``load``: ``caravel up`` of this checkout (and of ``--old TREE``, alternating, round after
round) under a closed loop of ``--tables`` two-seat tables over WebSockets
(``peers/caravel_loop.py``). Every Python process of the server runs with a probe (a
``sitecustomize`` put on its ``PYTHONPATH``: ``gc.callbacks`` timing each collection on the
thread's CPU clock) that writes its figures to a folder; printed per process: CPU ms per
move, the collector's ms per move and share of the process' CPU, collections per 1,000
moves by generation, and the objects frozen out of collections. ``--untuned`` adds this
checkout with the collector as CPython sets it (``gc.freeze`` and ``gc.set_threshold``
made no-ops: what ``services.runtime.tune_collector`` saves). ``--cycles``: in the window,
what only a collection frees (``gc.DEBUG_SAVEALL``, per move and by type) and the source
compiled at run time (the ``compile`` audit event: ``compile()``, ``exec``/``eval`` of a
string, a dataclass or namedtuple made), by where; its forced collections are counted.

``start``: ``caravel part SERVICES`` of each tree against ``--redis-url`` (a key prefix and
SQLite data folder of its own), told to say when it serves through the readiness pipe a
child of ``caravel up`` writes to (``CARAVEL_CHILD_READY_FD``): the CPU seconds of the
process from its exec until then, and the modules it imported by then (from the probe).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "peers"))

import caravel_loop
import psutil

from services.capacity import free_port, server_env, wait_ready
from services.children import terminate

TREE = str(Path(__file__).resolve().parent.parent)

PROBE = '''
import gc, json, os, sys, threading, time

_out = os.environ.get("CARAVEL_PROBE_DIR")
if _out and os.environ.get("CARAVEL_PROBE_UNTUNED"):  # the collector as CPython sets it
    gc.freeze = lambda: None
    gc.set_threshold = lambda *thresholds: None
if _out:
    _figures = {"collections": [0, 0, 0], "gc_cpu_s": [0.0, 0.0, 0.0]}
    _began = [0.0]

    def _timed(phase, info):
        if phase == "start":
            _began[0] = time.thread_time()
        else:
            generation = info["generation"]
            _figures["collections"][generation] += 1
            _figures["gc_cpu_s"][generation] += time.thread_time() - _began[0]

    gc.callbacks.append(_timed)

    def _compiled(event, args):
        """Source compiled (compile(), exec() or eval() of a string) while "save" is
        there, counted by where it was asked for."""
        if event == "compile" and _figures.get("saving") and "garbage" not in _figures:
            frame, where = sys._getframe(1), []
            while frame is not None and len(where) < 4:
                where.append(f"{frame.f_code.co_filename.rsplit('/', 2)[-1]}:{frame.f_lineno}")
                frame = frame.f_back
            key = " < ".join(where)
            _compiles[key] = _compiles.get(key, 0) + 1

    _compiles = {}
    sys.addaudithook(_compiled)

    def _cycles():
        """Between the files "save" and "count" in the folder: what only a collection
        frees (gc.DEBUG_SAVEALL keeps it in gc.garbage), counted by type."""
        if "saving" not in _figures and os.path.exists(os.path.join(_out, "save")):
            gc.collect()
            gc.garbage.clear()
            gc.set_debug(gc.DEBUG_SAVEALL)
            _figures["saving"] = True
        if "garbage" not in _figures and os.path.exists(os.path.join(_out, "count")):
            _figures["old_objects"] = len(gc.get_objects(2))  # not frozen: a full one scans
            began = time.thread_time()
            gc.collect()
            _figures["full_collection_ms"] = round(1000 * (time.thread_time() - began), 1)
            gc.set_debug(0)
            kinds = {}
            for thing in gc.garbage:
                name = type(thing).__qualname__
                if isinstance(thing, BaseException):
                    name = f"{name}: {str(thing)[:60]}"
                frame = getattr(thing, "tb_frame", thing)  # a traceback: its frame's code
                code = getattr(thing, "__code__", None) or getattr(frame, "f_code", None)
                if code is not None:  # a function, frame or traceback: where its code is
                    where = code.co_filename.rsplit("/", 2)[-2:]
                    name = f"{name} {code.co_qualname} ({'/'.join(where)})"
                kinds[name] = kinds.get(name, 0) + 1
            _figures["garbage"] = len(gc.garbage)
            _figures["garbage_kinds"] = sorted(kinds.items(), key=lambda kv: -kv[1])[:16]
            _figures["compiles"] = sum(_compiles.values())
            _figures["compiled_at"] = sorted(_compiles.items(), key=lambda kv: -kv[1])[:8]
            gc.garbage.clear()

    def _write():
        path = os.path.join(_out, f"{os.getpid()}.json")
        while True:
            time.sleep(0.2)
            _cycles()
            if not _figures.get("frozen"):  # once frozen: it walks the list, a cost of its own
                _figures["frozen"] = gc.get_freeze_count()
            times = os.times()
            figures = {
                **_figures,
                "cpu_s": times.user + times.system,
                "argv": sys.argv,
                "threshold": gc.get_threshold(),
                "modules": len(sys.modules),
            }
            with open(path + ".tmp", "w") as f:
                f.write(json.dumps(figures))  # json.dump: cycles of its own
            os.replace(path + ".tmp", path)

    threading.Thread(target=_write, daemon=True).start()
'''


@contextlib.contextmanager
def probed(tree: str, untuned: bool = False) -> Iterator[tuple[dict[str, str], Path]]:
    """The environment of a process of ``tree`` with the probe, and the probe's folder;
    ``untuned``: ``gc.freeze`` and ``gc.set_threshold`` made no-ops (CPython's defaults)."""
    with tempfile.TemporaryDirectory(prefix="cvprobe-") as folder:
        code, out = Path(folder, "code"), Path(folder, "out")
        code.mkdir()
        out.mkdir()
        (code / "sitecustomize.py").write_text(PROBE)
        env = {"PYTHONPATH": f"{tree}:{code}", "CARAVEL_PROBE_DIR": str(out)}
        yield {**env, **({"CARAVEL_PROBE_UNTUNED": "1"} if untuned else {})}, out


def read_probes(out: Path) -> dict[int, dict[str, Any]]:
    found = {}
    for path in out.glob("*.json"):
        with contextlib.suppress(OSError, ValueError):
            found[int(path.stem)] = json.loads(path.read_text())
    return found


def role(argv: list[str]) -> str:
    """``up`` or ``part SERVICES``: the command a process of the server runs."""
    return " ".join(argv[1:])


@contextlib.contextmanager
def caravel_up(
    tree: str, processes: int, untuned: bool
) -> Iterator[tuple[str, psutil.Process, Path]]:
    """``caravel up`` of ``tree``, probed: its base URL, process, and the probe's folder."""
    port = free_port()
    with probed(tree, untuned) as (extra, out):
        env = {**server_env(port, "cvproc", metrics_port="0", processes=str(processes)), **extra}
        cli = [sys.executable, "-m", "services.cli", "up"]
        process = subprocess.Popen(cli, env=env, cwd=tree, stdout=subprocess.DEVNULL)
        try:
            yield f"http://127.0.0.1:{port}", psutil.Process(process.pid), out
        finally:
            terminate([process], 60)


async def load_round(tree: str, untuned: bool, args: argparse.Namespace) -> dict[str, Any]:
    with caravel_up(tree, args.processes, untuned) as (base, server, out):
        await wait_ready(base)
        loop = caravel_loop.closed_loop(
            base, server, "ws", args.tables, args.seconds, "age_of_discovery", args.warmup
        )
        played = asyncio.create_task(loop)
        await asyncio.sleep(args.warmup + 0.5)
        before = read_probes(out)
        if args.cycles:
            (out / "save").touch()
        window = args.seconds - 1.0
        await asyncio.sleep(window)
        after = read_probes(out)
        if args.cycles:
            (out / "count").touch()
            await asyncio.sleep(1.0)
            garbage = read_probes(out)
        result = await played
    per_move = 1000 / (result["moves_per_second"] * window)
    processes = {}
    for pid, end in after.items():
        start = before.get(pid)
        if start is None:
            continue
        cpu = end["cpu_s"] - start["cpu_s"]
        gc_cpu = sum(end["gc_cpu_s"]) - sum(start["gc_cpu_s"])
        counts = [e - s for e, s in zip(end["collections"], start["collections"], strict=True)]
        processes[role(end["argv"])] = {
            "cpu_ms_per_move": round(cpu * per_move, 3),
            "gc_ms_per_move": round(gc_cpu * per_move, 4),
            "gc_share": round(gc_cpu / cpu, 4) if cpu else 0.0,
            "collections_per_1000_moves": [round(c * per_move, 1) for c in counts],
            "frozen": end["frozen"],
            "threshold": end["threshold"],
        }
        if args.cycles:
            found = garbage[pid]
            moves = result["moves_per_second"] * window
            processes[role(end["argv"])]["cyclic_garbage_per_move"] = round(
                found["garbage"] / moves, 2
            )
            processes[role(end["argv"])]["garbage_kinds"] = found["garbage_kinds"]
            processes[role(end["argv"])]["compiles_per_move"] = round(found["compiles"] / moves, 3)
            processes[role(end["argv"])]["compiled_at"] = found["compiled_at"]
            processes[role(end["argv"])]["old_objects"] = found["old_objects"]
            processes[role(end["argv"])]["full_collection_ms"] = found["full_collection_ms"]
    return {
        "moves_per_second": result["moves_per_second"],
        "server_cpu_ms_per_move": result["server_cpu_ms_per_move"],
        "processes": processes,
    }


def start_round(tree: str, services: str, redis_url: str) -> dict[str, Any]:
    """``caravel part services`` of ``tree``: CPU seconds from exec to serving, modules."""
    with probed(tree) as (extra, out), tempfile.TemporaryDirectory(prefix="cvstart-") as data:
        read, write = os.pipe()
        env = {
            **server_env(free_port(), "cvstart", metrics_port="0", redis_url=redis_url),
            **extra,
            "CARAVEL_DATA_DIR": data,
            "CARAVEL_HTTP_SHARE_PORT": "true",
            "CARAVEL_CHILD_READY_FD": str(write),
        }
        cli = [sys.executable, "-m", "services.cli", "part", services]
        started = time.perf_counter()
        process = subprocess.Popen(
            cli, env=env, cwd=tree, stdout=subprocess.DEVNULL, pass_fds=(write,)
        )
        os.close(write)
        try:
            said = os.read(read, 16)  # blocks until the child serves (or dies: b"")
            cpu = psutil.Process(process.pid).cpu_times()
            elapsed = time.perf_counter() - started
            time.sleep(0.5)  # the probe's next figures
            probe = read_probes(out).get(process.pid, {})
        finally:
            os.close(read)
            terminate([process], 60)
    if not said:
        raise RuntimeError(f"caravel part {services} of {tree} exited before serving")
    return {
        "start_cpu_s": round(cpu.user + cpu.system, 3),
        "start_wall_s": round(elapsed, 2),
        "modules": probe.get("modules"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", choices=("load", "start"))
    parser.add_argument("--old", help="another checkout, run alternately (before/after)")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--tables", type=int, default=20)
    parser.add_argument("--seconds", type=float, default=12)
    parser.add_argument("--warmup", type=float, default=3)
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument(
        "--cycles",
        action="store_true",
        help="count, in the window, what only the collector frees (gc.DEBUG_SAVEALL) and"
        " the source compiled at run time (the 'compile' audit event)",
    )
    parser.add_argument(
        "--untuned",
        action="store_true",
        help="also this checkout with CPython's collector settings (no freeze, threshold 700)",
    )
    parser.add_argument("--parts", nargs="+", default=["engine,ai,scoring,views", "engine"])
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/9")
    args = parser.parse_args()
    trees = {"this": (TREE, False)}
    if args.untuned:
        trees["this, collector untuned"] = (TREE, True)
    if args.old:
        trees["old"] = (args.old, False)
    for n in range(args.rounds):
        for label, (tree, untuned) in trees.items():
            if args.what == "load":
                figures = asyncio.run(load_round(tree, untuned, args))
                print(json.dumps({"round": n, "tree": label, **figures}), flush=True)
            else:
                for services in args.parts:
                    figures = start_round(tree, services, args.redis_url)
                    row = {"round": n, "tree": label, "part": services, **figures}
                    print(json.dumps(row), flush=True)
        print(f"load average {os.getloadavg()[0]:.1f}", flush=True)


if __name__ == "__main__":
    main()
