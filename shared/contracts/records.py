"""The small records services exchange through Redis besides envelopes, parsed in one place:
the partition notification (one entry of a partition's event stream) and the seats hash (who
plays each seat of a game, and its move deadline)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from .codec import load_json

HUMAN = "human"
LEFT = "left"
BOT_PREFIX = "bot:"


class Notification(NamedTuple):
    """One command's redacted events in a partition's event stream: the game, the version
    after them, how many there are and their JSON array (``g``, ``v``, ``n``, ``e``)."""

    game_id: str
    version: int
    size: int
    events_json: bytes

    @classmethod
    def from_fields(cls, fields: Mapping[bytes, bytes]) -> Notification:
        return cls(fields[b"g"].decode(), int(fields[b"v"]), int(fields[b"n"]), bytes(fields[b"e"]))

    def events(self) -> list[dict[str, Any]]:
        """The events as plain JSON objects (public parts only)."""
        events: list[dict[str, Any]] = load_json(self.events_json)
        return events


def final(who: str) -> bool:
    """A seat's player that can no longer change: a bot, or a player who left (a running
    table takes no joins)."""
    return who == LEFT or who.startswith(BOT_PREFIX)


IMPORTED = "imported"  # the seats hash's field marking an imported game
EXPERIMENT = "experiment"  # the seats hash's field naming a `caravel lab run --live` experiment
EXPERIMENT_GAMES = "experiment_games"  # and how many games that run plays (its plan)


@dataclass
class Seats:
    """Who plays each seat of a game (``human``, ``bot:<level>`` or ``left``) and the table's
    move deadline: the lobby writes it before it creates the game; the engine, the bot player
    and scoring read it."""

    players: dict[int, str] = field(default_factory=dict)
    deadline_s: float | None = None
    imported: bool = False  # loaded by `caravel games import`, not played here
    experiment: str | None = None  # played for `caravel lab run --live` under this name
    # How many games that run plays: with the games' logs, what a rebuild needs to write the
    # experiment's row again once SQL has lost it (complete or incomplete).
    experiment_games: int | None = None

    def to_mapping(self) -> dict[str, str | float]:
        out: dict[str, str | float] = {str(seat): who for seat, who in self.players.items()}
        if self.deadline_s is not None:
            out["deadline_s"] = self.deadline_s
        if self.imported:
            out[IMPORTED] = "1"
        if self.experiment is not None:
            out[EXPERIMENT] = self.experiment
        if self.experiment_games is not None:
            out[EXPERIMENT_GAMES] = str(self.experiment_games)
        return out

    @classmethod
    def from_hash(cls, raw: Mapping[bytes | str, bytes | str]) -> Seats:
        seats = cls()
        for key, value in raw.items():
            name = key.decode() if isinstance(key, bytes) else key
            text = value.decode() if isinstance(value, bytes) else value
            if name == "deadline_s":
                seats.deadline_s = float(text)
            elif name == IMPORTED:
                seats.imported = text == "1"
            elif name == EXPERIMENT:
                seats.experiment = text
            elif name == EXPERIMENT_GAMES:
                seats.experiment_games = int(text)
            elif name.isdigit():
                seats.players[int(name)] = text
        return seats

    def who(self, seat: int) -> str:
        """``human`` for a seat no lobby assigned (a game created without one)."""
        return self.players.get(seat, HUMAN)

    def played_by_bots(self) -> frozenset[int]:
        """The seats a bot plays, its own or the fallback of a player who left."""
        return frozenset(seat for seat, who in self.players.items() if final(who))

    def bot_levels(self) -> dict[int, str | None]:
        """:meth:`played_by_bots` with each seat's bot level (``None``: a leaver's seat,
        played by the fallback)."""
        return {seat: self.bot_level(seat) for seat in self.played_by_bots()}

    def bot_level(self, seat: int) -> str | None:
        who = self.who(seat)
        return who.removeprefix(BOT_PREFIX) if who.startswith(BOT_PREFIX) else None
