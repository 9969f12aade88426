"""The ``mcts`` level: single-observer information-set Monte-Carlo tree search (SO-ISMCTS).

The bot sees its seat's observation only. Each iteration draws a whole state consistent with
it (:class:`~shared.games.age_of_discovery.Sampler`: unseen tokens, pile and deck orders,
the generator, other seats' secret casualty picks), then walks one tree shared by all those
determinizations, choosing among the commands legal in this one (UCB1 with availability
counts, so a command that is rarely legal is not starved), adds one node, lets the greedy
bot play every seat for a while, and scores the result with a heuristic. Nodes widen
progressively, best commands by the greedy values first, so a short budget still searches
plausible moves. Every seat that moves in the tree maximises its own reward, so opponents
are modelled as playing to win, not as playing against the observer.
"""

from __future__ import annotations

import json
import math
import random
import time
from collections.abc import Callable, Sequence
from functools import lru_cache
from typing import Any

from shared.games import age_of_discovery as aod
from shared.games.age_of_discovery.scoring import colony_vp

Observation = dict[str, Any]
Values = Callable[[Observation, random.Random], list[float]]

EXPLORATION = 0.7  # UCB1's constant, for rewards in [0, 1]
WIDEN_BASE, WIDEN_RATE = 2, 0.5  # a node tries 2 + 0.5·√visits commands, best-ranked first
ROLLOUT_DECISIONS = 60  # playout length before the heuristic judges (40 and 80 did as well)
MARGIN_SCALE = 4.0  # VP: a lead this large is worth about three quarters of a win
MONEY_PER_VP = 4.0  # money left is worth something: it buys buildings and wins tie-breaks


class Node:
    """One decision point of the shared tree, reached by ``seat`` playing the edge into it.

    ``ranked`` orders the commands first seen here by the policy's values: the search
    widens a node progressively, most promising commands first, so a short budget still
    spends its iterations on plausible moves.
    """

    __slots__ = ("available", "children", "ranked", "reward", "seat", "visits")

    def __init__(self, seat: int) -> None:
        self.seat = seat
        self.visits = 0
        self.available = 0
        self.reward = 0.0
        self.children: dict[aod.Command, Node] = {}
        self.ranked: list[aod.Command] = []

    def widen(self, legal: Sequence[aod.Command]) -> aod.Command | None:
        """The next command to add here, if the node may grow and has one legal now.

        A node whose children are all illegal in this determinization (the hidden values
        changed what its seat may do) always grows: selection needs a legal child.
        """
        full = len(self.children) >= WIDEN_BASE + WIDEN_RATE * math.sqrt(self.visits)
        if full and any(c in self.children for c in legal):
            return None
        allowed = set(legal)
        for c in self.ranked:
            if c in allowed and c not in self.children:
                return c
        return next((c for c in legal if c not in self.children), None)

    def select(self, legal: Sequence[aod.Command]) -> aod.Command:
        """UCB1 over the children legal in this determinization; each counts one more
        availability, chosen or not, so a command that is rarely legal is not starved."""
        best, best_value = legal[0], -1.0
        for c in legal:
            child = self.children.get(c)
            if child is None:
                continue
            child.available += 1
            value = child.reward / child.visits + EXPLORATION * math.sqrt(
                math.log(child.available) / child.visits
            )
            if value > best_value:
                best, best_value = c, value
        return best


class Search:
    """A search from one observation; :meth:`run` answers the observer's best command.

    ``values`` scores the legal commands of an observation (the greedy bot's heuristic):
    it ranks each new node's commands and plays the playouts.
    """

    def __init__(self, observation: Observation, rnd: random.Random, values: Values) -> None:
        self.observation = observation
        rules = _rules(observation["ruleset"], json.dumps(observation["options"], sort_keys=True))
        self.sampler = aod.Sampler(rules, observation)
        self.seat: int = observation["seat"]
        self.rnd = rnd
        self.values = values
        self.root = Node(self.seat)
        self.iterations = 0

    def run(self, stop: float, max_iterations: int | None = None) -> aod.Command:
        """Iterate until ``time.perf_counter()`` reaches ``stop`` (or ``max_iterations`` are
        done), then play the most visited command: the best found so far."""
        legal = [aod.command_from_dict(c) for c in self.observation["legal_commands"]]
        if len(legal) == 1:
            return legal[0]
        self.root.ranked = self._rank(self.observation, legal)
        while time.perf_counter() < stop and (
            max_iterations is None or self.iterations < max_iterations
        ):
            self.iterate(stop)
        children = self.root.children
        order = {c: i for i, c in enumerate(self.root.ranked)}
        return max(legal, key=lambda c: (children[c].visits if c in children else 0, -order[c]))

    def iterate(self, stop: float) -> None:
        """One determinization: select, expand one node, play out, back up the rewards."""
        self.iterations += 1
        state = self.sampler.sample(self.rnd.getrandbits(64))
        node, path = self.root, [self.root]
        while decisions := aod.pending(state):
            # Simultaneous decisions (casualties) are taken in order, the observer's first.
            seat = self.seat if node is self.root else decisions[0].seat
            legal = aod.legal_commands(state, seat)
            if node is not self.root and not node.ranked:
                node.ranked = self._rank(aod.view(state, seat), legal)
            new = node.widen(legal)
            if new is not None:
                child = node.children[new] = Node(seat)
                child.available += 1
                aod.decide_into(state, new)
                path.append(child)
                break
            command = node.select(legal)
            node = node.children[command]
            aod.decide_into(state, command)
            path.append(node)
        rewards = self.playout(state, stop)
        for visited in path:
            visited.visits += 1
            visited.reward += rewards[visited.seat]

    def _rank(self, observation: Observation, legal: list[aod.Command]) -> list[aod.Command]:
        values = self.values(observation, self.rnd)
        return [c for _, c in sorted(zip(values, legal, strict=True), key=lambda p: -p[0])]

    def playout(self, state: aod.GameState, stop: float) -> list[float]:
        """The policy plays every seat for a while (cut short when time is up, so the last
        iteration ends on time), then each seat's reward in [0, 1]."""
        for _ in range(ROLLOUT_DECISIONS):
            decisions = aod.pending(state)
            if not decisions or time.perf_counter() >= stop:
                break
            seat = decisions[0].seat
            observation = aod.view(state, seat)
            values = self.values(observation, self.rnd)
            best = max(range(len(values)), key=values.__getitem__)
            aod.decide_into(state, aod.command_from_dict(observation["legal_commands"][best]))
        return rewards(state)


@lru_cache(maxsize=16)
def _rules(ruleset: str, options: str) -> aod.Rules:
    """Compiled rules, once per ruleset and options (a decision must not reparse files)."""
    return aod.compile_rules(aod.load_ruleset(ruleset), json.loads(options))


def evaluate(state: aod.GameState) -> list[float]:
    """Each seat's expected final VP, roughly: its score so far, the colony majorities it
    holds now counted for every age scoring still to come, and its money."""
    rules = state.rules
    rows = aod.score(state)
    to_come = sum(1 for t in rules.ruleset.age_end_turns if t >= state.turn)
    if state.phase == "over":
        to_come = 0
    colonies = [0.0] * state.n
    if to_come:
        for units in state.units:
            for seat, vp in enumerate(colony_vp(units, rules)):
                colonies[seat] += vp * to_come
    return [
        row["total"] + colonies[seat] + state.money[seat] / MONEY_PER_VP
        for seat, row in enumerate(rows)
    ]


def rewards(state: aod.GameState) -> list[float]:
    """A won game is worth 1, a lost one 0; between, the margin over the best rival counts."""
    values = evaluate(state)
    out = []
    for seat, mine in enumerate(values):
        rival = max(v for other, v in enumerate(values) if other != seat)
        out.append(1 / (1 + math.exp(-(mine - rival) / MARGIN_SCALE)))
    return out
