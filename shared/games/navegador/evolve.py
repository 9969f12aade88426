"""apply: one event's bookkeeping on a state. No choices, no chance, no clock.

The setup's chance (stacks, removed tokens, start player) arrives inside its event (the
hidden parts in ``secret``), so a log replays without a generator. ``apply`` mutates a
private state; :func:`evolve` copies first.
"""

from __future__ import annotations

from typing import Any

from ..base import EventHandlers
from .ruleset import COLUMNS
from .state import State

handles: EventHandlers[State] = EventHandlers()
HANDLERS = handles.table
apply = handles.apply
evolve = handles.evolve


def _region(s: State, name: str) -> int:
    return s.rules.regions.index(name)


def _good(s: State, name: str) -> int:
    return s.rules.goods.index(name)


def _start_action(s: State, action: str) -> None:
    """Enter an action: its per-action bookkeeping starts afresh."""
    s.stage = action
    regions = len(s.rules.regions)
    s.moved = [0] * regions
    s.used_ships = [0] * regions
    s.explored_now = False
    s.used_workers = 0
    s.wild_used = False
    s.traded = [False] * len(s.rules.goods)


@handles("game_created")
def _game_created(s: State, d: dict[str, Any], secret: Any) -> None:
    s.names = list(d["players"])


@handles("setup")
def _setup(s: State, d: dict[str, Any], secret: Any) -> None:
    assert secret is not None
    s.start = d["start_player"]
    s.holder = d["card_holder"]
    s.stacks = [sorted(stack) for stack in secret["stacks"]]
    s.removed = [sorted(tokens) for tokens in secret["removed"]]


@handles("phase_started")
def _phase_started(s: State, d: dict[str, Any], secret: Any) -> None:
    s.phase = d["phase"]
    s.next_phase = 0
    for c, count in enumerate(d["gallery"]):
        s.supply[c] += s.gallery[c] - count
        s.gallery[c] = count


@handles("turn_started")
def _turn_started(s: State, d: dict[str, Any], secret: Any) -> None:
    s.current = d["seat"]
    s.turn = d["turn"]
    s.stage = "turn"


@handles("card_used")
def _card_used(s: State, d: dict[str, Any], secret: Any) -> None:
    _start_action(s, "sailing")
    s.card_sail = True


@handles("card_passed")
def _card_passed(s: State, d: dict[str, Any], secret: Any) -> None:
    s.holder = d["to"]
    s.marker = d["marker"]
    if s.stage == "card_done":
        s.stage = "turn"  # the card's Sailing is over: the holder's own turn goes on


@handles("rondel_moved")
def _rondel_moved(s: State, d: dict[str, Any], secret: Any) -> None:
    seat = d["seat"]
    s.stone[seat] = d["field"]
    if seat == s.holder and s.marker < 0:
        s.marker = d["field"]  # the first holder's orange ship, after its first placement
    s.owed = d["cost"]
    if s.owed:
        s.stage = "pay"
    else:
        _start_action(s, s.rules.fields[d["field"]])


@handles("ship_paid")
def _ship_paid(s: State, d: dict[str, Any], secret: Any) -> None:
    s.ships[d["seat"]][_region(s, d["region"])] -= 1
    s.owed -= 1
    if not s.owed:
        _start_action(s, s.rules.fields[s.stone[d["seat"]]])


@handles("ship_sailed")
def _ship_sailed(s: State, d: dict[str, Any], secret: Any) -> None:
    ships = s.ships[d["seat"]]
    ships[_region(s, d["origin"])] -= 1
    destination = _region(s, d["destination"])
    ships[destination] += 1
    s.moved[destination] += 1


@handles("explored")
def _explored(s: State, d: dict[str, Any], secret: Any) -> None:
    seat = d["seat"]
    region = _region(s, d["region"])
    ships = s.ships[seat]
    for origin in d["origins"]:
        ships[_region(s, origin)] -= 1
    arrived = len(d["origins"]) - d["lost"]
    ships[region] += arrived
    s.moved[region] += arrived
    s.explored |= 1 << region
    s.explored_by[region] = seat
    s.explorers[seat] += 1
    s.explored_now = True
    s.stacks[region] = sorted(d["tokens"])
    s.money[seat] += d["bonus"]
    if d["starts_phase"] > s.phase:
        s.next_phase = max(s.next_phase, d["starts_phase"])


@handles("end_triggered")
def _end_triggered(s: State, d: dict[str, Any], secret: Any) -> None:
    s.triggered = True


@handles("colony_founded")
def _colony_founded(s: State, d: dict[str, Any], secret: Any) -> None:
    seat = d["seat"]
    region = _region(s, d["region"])
    s.stacks[region].remove(d["price"])
    s.colonies[seat][_good(s, d["good"])].append(d["price"])
    s.money[seat] -= d["price"]
    s.used_ships[region] += 1
    s.used_workers += 2


@handles("building_bought")
def _building_bought(s: State, d: dict[str, Any], secret: Any) -> None:
    seat = d["seat"]
    t = next(i for i, track in enumerate(s.rules.tracks) if track.id == d["building"])
    track = s.rules.tracks[t]
    s.left[t] -= 1
    s.money[seat] -= d["price"]
    s.used_workers += track.workers
    column = COLUMNS[track.column]
    if column == "factory":
        s.factories[seat][track.good] += 1
    elif column == "shipyard":
        s.shipyards[seat] += 1
    else:
        s.churches[seat] += 1


@handles("goods_sold")
@handles("goods_processed")
def _goods_traded(s: State, d: dict[str, Any], secret: Any) -> None:
    g = _good(s, d["good"])
    s.money[d["seat"]] += d["income"]
    s.market[g] = d["row"]
    s.traded[g] = True
    if d.get("wildcard"):
        s.wild_used = True


@handles("workers_recruited")
def _workers_recruited(s: State, d: dict[str, Any], secret: Any) -> None:
    seat = d["seat"]
    s.workers[seat] += d["gained"]
    s.money[seat] += d["income"] - d["cost"]
    s.stage = "turn_done"


@handles("ships_bought")
def _ships_bought(s: State, d: dict[str, Any], secret: Any) -> None:
    seat = d["seat"]
    s.ships[seat][s.rules.home] += d["gained"]
    s.money[seat] += d["income"] - d["cost"]
    s.stage = "turn_done"


@handles("privilege_taken")
def _privilege_taken(s: State, d: dict[str, Any], secret: Any) -> None:
    seat = d["seat"]
    c = COLUMNS.index(d["column"])
    s.workers[seat] -= 1
    s.gallery[c] -= 1
    s.privileges[seat][c] += 1
    s.money[seat] += d["income"]
    s.stage = "turn_done"


@handles("action_ended")
def _action_ended(s: State, d: dict[str, Any], secret: Any) -> None:
    """The action is over: after the card's Sailing the holder's own turn follows."""
    if s.card_sail:
        s.card_sail = False
        s.stage = "card_done"
    else:
        s.stage = "turn_done"


@handles("turn_ended")
def _turn_ended(s: State, d: dict[str, Any], secret: Any) -> None:
    s.final_left = d["final_turns_left"]
    s.stage = "between"


@handles("game_ended")
def _game_ended(s: State, d: dict[str, Any], secret: Any) -> None:
    s.stage = "over"
