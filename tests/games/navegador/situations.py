"""Put a Navegador game into the situations of the rules' examples.

Games are made and played through the public API (``new_game``, ``legal_commands``,
``decide_into``); only the situation itself is written into the plain ``State`` fields (ships
on the map, money, workers, buildings, stacks, whose turn and which action), the way an
example of the rules describes it.
"""

from __future__ import annotations

from shared.games.api import Command, Event
from shared.games.navegador import State, compile_rules, decide_into, load_ruleset, new_game
from shared.games.navegador.evolve import _start_action

RULES = compile_rules(load_ruleset("standard"))


def region(name: str) -> int:
    return RULES.regions.index(name)


def good(name: str) -> int:
    return RULES.goods.index(name)


def game(players: int = 4, seed: int = 1) -> State:
    """A fresh game, before anyone's first move."""
    return new_game(RULES, players, seed)[0]


def explore(s: State, *names: str) -> None:
    """Mark regions explored (their stacks turn face up), as earlier turns would have."""
    for name in names:
        s.explored |= 1 << region(name)


def at_action(s: State, seat: int, action: str) -> State:
    """``seat``'s turn, its stone on ``action``'s field, the action just begun."""
    s.current = seat
    s.stone[seat] = RULES.fields.index(action)
    _start_action(s, action)
    return s


def at_turn(s: State, seat: int, field: int | None) -> State:
    """``seat``'s turn before the stone moves; ``field``: where the stone stands."""
    s.current = seat
    s.stage = "turn"
    s.stone[seat] = -1 if field is None else field
    return s


def ships(s: State, seat: int, **where: int) -> None:
    """Put exactly these ships of ``seat`` on the map (the rest in its supply)."""
    s.ships[seat] = [0] * len(RULES.regions)
    for name, count in where.items():
        s.ships[seat][region(name)] = count


def play(s: State, *commands: Command) -> list[Event]:
    """Play commands in order on ``s``; the events they caused."""
    out: list[Event] = []
    for command in commands:
        out += decide_into(s, command)
    return out


def of_type(events: list[Event], kind: str) -> list[dict[str, object]]:
    return [e.data for e in events if e.type == kind]
