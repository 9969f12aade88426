"""The rules' entry points: a new game, and ``decide``, which checks a command, performs it and
plays on to the next real decision. The parts live beside it: :mod:`.decisions` (who decides
what), :mod:`.legal` (which commands are legal), :mod:`.checks`, :mod:`.perform` (what a
command causes) and :mod:`.phases` (the automatic steps).

``decide`` turns a command into events and then plays every automatic step (paying the
Initiative box, awarding the ship, income, age scoring, the end-of-turn refresh, forced
choices) until a real decision is pending or the game is over. Events are applied to a
private copy as they are made, so each step sees the state its predecessors left.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ..checks import seat_names
from ..commands import Command
from ..protocol import Decision, Event
from ..ruleset_files import CARRIED
from . import rng
from .checks import _check
from .commands import Pass
from .decisions import _decisions, pending
from .emit import _emit
from .legal import LEGAL, _expedition_targets, _made, _price, legal_commands
from .perform import PERFORM
from .phases import AUTO, _start_turn
from .ruleset import Rules, Ruleset, compile_rules
from .state import GameState, blank_state

__all__ = ["decide", "decide_into", "legal_commands", "new_game", "pending"]

# --- new game --------------------------------------------------------------------------------


def new_game(
    ruleset: Ruleset | Rules,
    options: dict[str, Any] | None,
    players: Sequence[str] | int,
    seed: int,
) -> tuple[GameState, list[Event]]:
    """Deal a new game: the initial state and the setup events that produce it."""
    rules = ruleset if isinstance(ruleset, Rules) else compile_rules(ruleset, options)
    r = rules.ruleset
    names = seat_names(players, r)
    s = blank_state(rules, len(names))
    out: list[Event] = []
    _emit(
        s,
        out,
        "game_created",
        {
            "game": "age_of_discovery",
            "ruleset": r.name,
            "options": dict(rules.options),
            "players": names,
            **({} if rules.file is None else {CARRIED: rules.file}),
        },
        secret={"seed": seed},
    )
    _deal(s, out, rng.seed_state(seed))
    if rules.options["starting_order"] == "auction":
        _emit(s, out, "phase", {"phase": "auction", "queue": list(range(s.n))})
    else:
        state, order = rng.shuffled(s.rng, list(range(s.n)))
        _emit(s, out, "turn_order", {"order": order}, secret={"rng": state})
        for position, seat in enumerate(order):
            if amount := r.compensation[position]:
                _emit(s, out, "money", {"seat": seat, "amount": amount, "reason": "compensation"})
        _start_turn(s, out, 1)
    _advance(s, out)
    return s, out


def _deal(s: GameState, out: list[Event], state: int) -> None:
    rules = s.rules
    r = rules.ruleset
    state, tokens = rng.shuffled(state, list(range(len(rules.tokens))))
    token_on = [-1] * len(rules.regions)
    for region, discovered in enumerate(rules.start_discovered):
        if not discovered:
            token_on[region] = tokens.pop()
    pile = [g for g, count in enumerate(rules.good_counts) for _ in range(count)]
    for g in rules.region_good:
        pile.remove(g)
    state, pile = rng.shuffled(state, pile)
    revealed = [pile.pop() for _ in range(min(r.boxes.revealed_goods, len(pile)))]
    piles = []
    for age_pile in rules.piles:
        state, shuffled = rng.shuffled(state, list(age_pile))
        piles.append(shuffled)
    shown = [piles[0].pop() for _ in range(min(r.boxes.revealed_buildings, len(piles[0])))]
    state, deck = rng.shuffled(state, list(range(len(rules.cards))))
    _emit(
        s,
        out,
        "setup",
        {
            "goods_revealed": [rules.goods[g] for g in revealed],
            "buildings_revealed": [rules.buildings[b].id for b in shown],
        },
        secret={
            "token_on": token_on,
            "unused_tokens": tokens,
            "goods_pile": pile,
            "piles": piles,
            "deck": deck,
            "rng": state,
        },
    )
    for seat in range(s.n):
        _emit(s, out, "money", {"seat": seat, "amount": r.starting_money, "reason": "start"})


# --- decide ----------------------------------------------------------------------------------


def decide(state: GameState, command: Command) -> list[Event]:
    """The events ``command`` causes, up to the next real decision.

    Raises :class:`RuleViolation` (with a code and a reason) for any command the rules
    refuse; ``state`` is never changed.
    """
    return decide_into(state.copy(), command)


def decide_into(s: GameState, command: Command, *, trusted: bool = False) -> list[Event]:
    """:func:`decide` on a private state, which it leaves advanced past the events.

    The fast path for search and simulation; on a violation ``s`` is unchanged. ``trusted``
    (:meth:`~shared.games.api.Game.decide_into`): ``command`` was taken from
    ``legal_commands(s, command.seat)`` in this very state, so it is not checked again.
    """
    decision = _decision_of(s, command.seat) if trusted else _check(s, command)
    out: list[Event] = []
    PERFORM[type(command)](s, command, decision, out)
    _advance(s, out)
    return out


def _decision_of(s: GameState, seat: int) -> Decision:
    """The pending decision of ``seat``, which has one (a trusted command's)."""
    if s.phase == "placement":
        return _decisions(seat, "place")[0]
    for d in pending(s):
        if d.seat == seat:
            return d
    raise AssertionError(f"a trusted command of seat {seat}, which has nothing to decide")


# --- automatic steps -------------------------------------------------------------------------


def _advance(s: GameState, out: list[Event]) -> None:
    """Play automatic steps and forced choices until a real decision is pending."""
    while s.phase != "over":
        if s.phase == "placement" and s.to_place:
            return  # a placement is never forced (and is most decisions)
        decisions = pending(s)
        if not decisions:
            AUTO[s.phase](s, out)
            continue
        if len(decisions) == 1:  # the usual case, without the lists below
            command = _forced(s, decisions[0])
            if command is None:
                return
            PERFORM[type(command)](s, command, decisions[0], out)
            continue
        forced = [_forced(s, d) for d in decisions]
        if all(f is None for f in forced):
            return
        for d, command in zip(decisions, forced, strict=True):
            if command is not None:
                PERFORM[type(command)](s, command, d, out)
                break


def _forced(s: GameState, d: Decision) -> Command | None:
    """The only legal command for ``d``, if there is exactly one."""
    if d.kind == "place":
        return None
    if d.kind == "expedition":
        return None if _expedition_targets(s) else _made(Pass, d.seat)
    chooses = CHOOSES.get(d.kind)
    if chooses is not None and chooses(s, d.seat):
        return None  # a choice for sure: its commands are listed once, by the player
    options = LEGAL[d.kind](s, d.seat)
    return options[0] if len(options) == 1 else None


# For some decisions, a cheap sufficient sign of two legal commands at least (Pass and one
# other), which spares ``_forced`` listing them all: the player lists them next anyway.


def _chooses_conflict(s: GameState, seat: int) -> bool:
    """Pass, and a Battle wherever the seat shares a region with another seat."""
    others = s.n - 2  # at most this many empty seats where two seats have units
    return any(here[seat] and here.count(0) <= others for here in s.units)


def _chooses_buy(s: GameState, seat: int) -> bool:
    """Pass, and every revealed building (each offers one choice at least) if affordable."""
    return bool(s.revealed_buildings) and s.money[seat] >= _price(s) and True in s.discovered


def _chooses_bid(s: GameState, seat: int) -> bool:
    """Pass, and a bid of every amount above the highest up to the seat's money."""
    return s.money[seat] > s.bid_high


CHOOSES: dict[str, Callable[[GameState, int], bool]] = {
    "conflict": _chooses_conflict,
    "buy": _chooses_buy,
    "bid": _chooses_bid,
}
