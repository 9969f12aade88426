"""Checking a command before it is performed, with a reason a player can read for each refusal."""

from __future__ import annotations

from collections.abc import Callable

from ..checks import command_seat
from ..commands import Command
from ..protocol import Decision, RuleViolation
from .commands import SPECIALIST_SPACES, BuyBuilding, Expedition, Place, War
from .decisions import ANSWERS, pending
from .evolve import UNIT
from .legal import SLOT_OF, _buy_choices, _expedition_targets, _price, _slot_open, legal_commands
from .state import GameState


def _check(s: GameState, command: Command) -> Decision:
    seat = command_seat(command, s.phase == "over", s.n)
    decisions = pending(s)
    decision = next((d for d in decisions if d.seat == seat), None)
    if decision is None:
        waiting = ", ".join(f"seat {d.seat} ({d.kind})" for d in decisions)
        raise RuleViolation(
            "out_of_turn", f"seat {seat} has nothing to decide; waiting for {waiting}"
        )
    if not isinstance(command, ANSWERS[decision.kind]):
        expected = ", ".join(c.type for c in ANSWERS[decision.kind])
        raise RuleViolation(
            "wrong_command", f"seat {seat} must decide '{decision.kind}': send one of {expected}"
        )
    CHECKS.get(type(command), _check_listed)(s, command)
    return decision


def _check_listed(s: GameState, command: Command) -> None:
    if command not in legal_commands(s, command.seat):
        raise RuleViolation("illegal", f"{_describe(command)} is not allowed here")


def _describe(command: Command) -> str:
    """A command for a message: its type and the fields it sets (an unset optional field
    is left out rather than shown as Python's None)."""
    fields = {k: v for k, v in command.to_dict().items() if k not in ("type", "seat")}
    shown = ", ".join(f"{k} {v!r}" for k, v in fields.items() if v is not None)
    return f"{command.type} ({shown})" if shown else command.type


def _check_place(s: GameState, c: Command) -> None:
    assert isinstance(c, Place)
    unit = UNIT.get(c.unit)
    if unit is None:
        raise RuleViolation("unknown_unit", f"unknown unit {c.unit!r}")
    if not s.avail[c.seat][unit]:
        raise RuleViolation("no_unit", f"seat {c.seat} has no {c.unit} left to place")
    if c.box == "specialists":
        if c.space not in SPECIALIST_SPACES:
            named = "needs a space" if c.space is None else f"has no space {c.space!r}"
            spaces = ", ".join(SPECIALIST_SPACES)
            raise RuleViolation("illegal_space", f"the Specialists box {named}: one of {spaces}")
    elif c.space is not None:
        raise RuleViolation("illegal_space", f"the {c.box} box takes no space name")
    slot = SLOT_OF.get((c.box, c.space))
    if slot is None:
        raise RuleViolation("unknown_box", f"there is no box {c.box!r}")
    if not _slot_open(s, c.seat, slot):
        if c.box == "initiative" and c.seat in s.initiative:
            raise RuleViolation("illegal_space", "a player may not put two units in Initiative")
        raise RuleViolation("box_full", f"no free space in the {c.box} box for seat {c.seat}")


def _check_buy(s: GameState, c: Command) -> None:
    assert isinstance(c, BuyBuilding)
    b = s.rules.building_index.get(c.building)
    if b is None or b not in s.revealed_buildings:
        raise RuleViolation("building_unavailable", f"{c.building!r} is not on offer")
    if s.money[c.seat] < _price(s):
        raise RuleViolation("not_enough_money", f"{c.building} costs ${_price(s)}")
    if c.regions not in _buy_choices(s, c.seat, b):
        if not c.regions:
            raise RuleViolation("illegal_region", f"{c.building} needs regions chosen")
        raise RuleViolation("illegal_region", f"{c.building} cannot take regions {list(c.regions)}")


def _check_expedition(s: GameState, c: Command) -> None:
    assert isinstance(c, Expedition)
    have = s.disc[c.seat]
    sent = (c.colonists, c.captains, c.soldiers)
    if any(not isinstance(x, int) or x < 0 for x in sent) or not any(sent):
        raise RuleViolation("illegal", "send at least one unit, and no negative counts")
    if any(x > h for x, h in zip(sent, have, strict=True)):
        raise RuleViolation(
            "no_unit", f"seat {c.seat} has only {have} (colonists, captains, soldiers) in Discovery"
        )
    targets = _expedition_targets(s)
    if c.region not in targets:
        named = ", ".join(_target_name(t) for t in targets) or "nothing"
        raise RuleViolation(
            "illegal_region",
            f"no expedition can target {_target_name(c.region)} now; it can target {named}",
        )


def _target_name(region: str | None) -> str:
    """An expedition target for a message: a region, or (None) the discovery deck."""
    return "the discovery deck" if region is None else repr(region)


def _check_war(s: GameState, c: Command) -> None:
    if s.money[c.seat] < s.rules.ruleset.values.war_cost:
        raise RuleViolation("not_enough_money", f"a war costs ${s.rules.ruleset.values.war_cost}")
    _check_listed(s, c)


CHECKS: dict[type[Command], Callable[[GameState, Command], None]] = {
    Place: _check_place,
    BuyBuilding: _check_buy,
    Expedition: _check_expedition,
    War: _check_war,
}
