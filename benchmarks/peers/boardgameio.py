"""boardgame.io's side of the peers benchmark: its server (Node, from npm, in-memory storage)
with a game of one move per turn for two seats, played closed loop by its own client over
socket.io (one move in flight per match), with the server's CPU per move."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import time
from typing import Any

from services.capacity import free_port
from services.children import terminate
from services.usage import cpu_s, tree_pids

VERSION = "0.50.2"

GAME = """
const Trivial = {
  name: 'trivial',
  setup: () => ({ moves: 0 }),
  moves: { move: ({ G }) => { G.moves += 1; } },
  turn: { minMoves: 1, maxMoves: 1 },
};
module.exports = { Trivial };
"""

SERVER = """
const { Server, Origins } = require('boardgame.io/server');
const { Trivial } = require('./game');
const server = Server({ games: [Trivial], origins: [Origins.LOCALHOST] });
// The lobby API on a port of its own: on the game server's port, koa-socket-2 has built the
// request handler before the API's routes are added (every API request is a 404 there).
const [port, apiPort] = process.argv.slice(2).map(Number);
server.run({ port, lobbyConfig: { apiPort } }, () => console.log('ready'));
"""

# argv: port, API port, matches, warm-up s, seconds. Prints "measuring" when the warm-up
# ends, then one JSON line: moves in the window and the p50 and p99 of their round trips
# (move sent -> the mover's state at the next turn), in ms.
CLIENT = """
const { Client } = require('boardgame.io/client');
const { SocketIO } = require('boardgame.io/multiplayer');
const { Trivial } = require('./game');
const [port, apiPort, matches, warmup, seconds] = process.argv.slice(2).map(Number);
const base = `http://127.0.0.1:${port}`;
const api = `http://127.0.0.1:${apiPort}`;
let measuring = false, moves = 0;
const trips = [];

async function post(path, body) {
  const r = await fetch(api + path, {
    method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body),
  });
  return r.json();
}

async function table() {
  const { matchID } = await post('/games/trivial/create', { numPlayers: 2 });
  for (const playerID of ['0', '1']) {
    const { playerCredentials } = await post(`/games/trivial/${matchID}/join`,
      { playerID, playerName: 'p' + playerID });
    const client = Client({
      game: Trivial, matchID, playerID, credentials: playerCredentials,
      multiplayer: SocketIO({ server: base }), debug: false,
    });
    let sentAt = null, lastTurn = -1;
    client.subscribe((state) => {
      if (!state || state.ctx.currentPlayer !== playerID || state.ctx.turn === lastTurn) return;
      lastTurn = state.ctx.turn;
      setImmediate(() => { sentAt = process.hrtime.bigint(); client.moves.move(); });
    });
    client.subscribe((state) => {
      if (sentAt === null || !state || state.ctx.currentPlayer === playerID) return;
      const ms = Number(process.hrtime.bigint() - sentAt) / 1e6;
      sentAt = null;
      if (measuring) { moves += 1; trips.push(ms); }
    });
    client.start();
  }
}

(async () => {
  for (let i = 0; i < matches; i++) await table();
  setTimeout(() => {
    measuring = true;
    console.log('measuring');
    setTimeout(() => {
      measuring = false;
      trips.sort((a, b) => a - b);
      const last = trips.length - 1;
      const pct = (q) => (trips.length ? trips[Math.min(last, Math.round(q * last))] : 0);
      // Written, then exit: process.exit right after a large write to a pipe cuts it short.
      const line = JSON.stringify({ moves, p50: pct(0.5), p99: pct(0.99) });
      process.stdout.write(line + String.fromCharCode(10), () => process.exit(0));
    }, seconds * 1000);
  }, warmup * 1000);
})();
"""


def install(folder: str | None = None) -> str:
    """A folder with boardgame.io from npm and the benchmark's scripts in it."""
    folder = folder or tempfile.mkdtemp(prefix="caravel-bgio-")
    if shutil.which("npm") is None or shutil.which("node") is None:
        raise RuntimeError("boardgame.io needs node and npm on the PATH")
    with open(os.path.join(folder, "package.json"), "w") as f:
        json.dump({"name": "caravel-peers", "private": True}, f)
    if not os.path.isdir(os.path.join(folder, "node_modules", "boardgame.io")):
        subprocess.run(
            ["npm", "install", "--no-audit", "--no-fund", f"boardgame.io@{VERSION}"],
            cwd=folder,
            check=True,
            stdout=subprocess.DEVNULL,
        )
    for name, text in (("game.js", GAME), ("server.js", SERVER), ("client.js", CLIENT)):
        with open(os.path.join(folder, name), "w") as f:
            f.write(text)
    return folder


def run(folder: str, tables: int, seconds: float, warmup_s: float = 3) -> dict[str, Any]:
    """One closed-loop run: moves/s, the server's CPU per move, round trips."""
    port, api_port = free_port(), free_port()
    server = subprocess.Popen(
        ["node", "server.js", str(port), str(api_port)],
        cwd=folder,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout is not None
        server.stdout.readline()  # "ready"
        args = [str(port), str(api_port), str(tables), str(warmup_s), str(seconds)]
        client = subprocess.Popen(
            ["node", "client.js", *args], cwd=folder, stdout=subprocess.PIPE, text=True
        )
        assert client.stdout is not None
        client.stdout.readline()  # "measuring"
        cpu0, started = cpu_s(tree_pids(server.pid)), time.perf_counter()
        line = client.stdout.readline()
        cpu1, elapsed = cpu_s(tree_pids(server.pid)), time.perf_counter() - started
        client.wait(timeout=30)
    finally:
        terminate([server], 10)
    out = json.loads(line)
    moves = max(out["moves"], 1)
    return {
        "system": "boardgame.io",
        "tables": tables,
        "moves": out["moves"],
        "refused": 0,
        "moves_per_second": round(out["moves"] / elapsed, 1),
        "server_cpu_ms_per_move": round(1000 * (cpu1 - cpu0) / moves, 3),
        "server_cores_busy": round((cpu1 - cpu0) / elapsed, 2),
        "round_trip_ms": {"p50": round(out["p50"], 2), "p99": round(out["p99"], 2)},
    }
