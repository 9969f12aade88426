"""Golden playthroughs (after OpenSpiel's): for every registered game, a few random games
at fixed seeds (2 to 4 players), their whole logs and final hashes kept in this directory.
``tests/games/test_playthroughs.py`` plays them again and fails on any difference, so a
change of behaviour anywhere in a game's rules (a draw, an event's data, a score) shows up
as the first event that differs.

When a rules change is meant, regenerate them and commit the new files with it::

    python -m tests.games.playthroughs --regenerate

Files: ``index.json`` (per playthrough: game, ruleset, players, seed, number of events and
decisions, final state hash) and one ``{game}-{players}p-{seed}.jsonl.gz`` per playthrough,
a JSON line per event: ``[type, data, secret, visibility]``.
"""

from __future__ import annotations

import gzip
import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from shared.contracts import dump_json
from shared.games import api

HERE = Path(__file__).parent
INDEX = HERE / "index.json"
REGENERATE = "python -m tests.games.playthroughs --regenerate"
SETUPS = ((2, 1), (3, 2), (4, 3))
"""(players, seed) of each game's playthroughs."""


@dataclass(frozen=True)
class Playthrough:
    game: str
    ruleset: str
    players: int
    seed: int
    events: int
    decisions: int
    final_hash: str

    @property
    def path(self) -> Path:
        return HERE / f"{self.game}-{self.players}p-{self.seed}.jsonl.gz"


def play(game_name: str, players: int, seed: int) -> tuple[Playthrough, list[api.Event]]:
    """One playthrough played now: random play at ``seed`` on the game's default ruleset."""
    game = api.get(game_name)
    played = api.play_random_game(game, game.rules(game.default_ruleset), players, seed)
    info = Playthrough(
        game_name,
        game.default_ruleset,
        players,
        seed,
        len(played.events),
        played.decisions,
        game.state_hash(played.state),
    )
    return info, played.events


def line(event: api.Event) -> str:
    """An event as its playthrough line (JSON, compact, keys as the rules wrote them)."""
    return dump_json([event.type, event.data, event.secret, event.visibility])


def read_log(path: Path) -> list[api.Event]:
    """A playthrough's stored events."""
    rows: list[Any] = [json.loads(text) for text in gzip.decompress(path.read_bytes()).splitlines()]
    return [api.Event(t, data, secret, visibility) for t, data, secret, visibility in rows]


def read_index() -> list[Playthrough]:
    return [Playthrough(**row) for row in json.loads(INDEX.read_text())]


def regenerate() -> list[Playthrough]:
    """Play every game's playthroughs again and write them (the old files replaced)."""
    for old in HERE.glob("*.jsonl.gz"):
        old.unlink()
    index = []
    for name in api.names():
        for players, seed in SETUPS:
            info, events = play(name, players, seed)
            text = "".join(line(event) + "\n" for event in events)
            info.path.write_bytes(gzip.compress(text.encode(), mtime=0))
            index.append(info)
    INDEX.write_text(json.dumps([asdict(p) for p in index], indent=1) + "\n")
    return index
