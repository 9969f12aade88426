"""The ``mcts`` level: single-observer information-set Monte-Carlo tree search (SO-ISMCTS),
for any game behind the :class:`~shared.games.api.Game` protocol.

The bot sees its seat's observation only. Each iteration draws a whole state consistent with
it (the game's :meth:`~shared.games.api.Game.sampler`: every hidden value drawn anew), then
walks one tree shared by all those determinizations, choosing among the commands legal in
this one (UCB1 with availability counts, so a command that is rarely legal is not starved),
adds one node, plays every seat for a while, and scores the result with the game's
``evaluate``. The game's greedy policy, when it has one, orders each node's commands (nodes
widen progressively, best first, so a short budget still searches plausible moves) and
plays the playouts, read straight off the sampled state where the game offers that
(:meth:`~shared.games.api.Game.state_policy`: no view is built per step); without a policy,
playouts are uniformly random and commands keep the game's order. Every seat that moves in
the tree maximises its own reward, so opponents are modelled as playing to win, not as
playing against the observer; a game may instead have them play its policy in the tree as in
the playouts, and its reward scale and playout length are its own too
(:meth:`~shared.games.api.Game.search_hints`).
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Sequence
from typing import Any

from shared.games.api import AnyGame, Command, Observation

EXPLORATION = 0.7  # UCB1's constant, for rewards in [0, 1]
WIDEN_BASE, WIDEN_RATE = 2, 0.5  # a node tries 2 + 0.5·√visits commands, best-ranked first
# Playout length and reward scale are the game's (:class:`~shared.games.api.SearchHints`):
# by default 32 decisions (about a turn of The Age of Discovery's 4 seats' placement and
# resolution; 60 and 80 did no better when each step built a view) and 4 points.
ROLLOUT_CAP = 4  # a playout that waits for the observer's turn stops at 4x its length anyway


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
        self.children: dict[Command, Node] = {}
        self.ranked: list[Command] = []

    def widen(self, legal: Sequence[Command]) -> Command | None:
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

    def select(self, legal: Sequence[Command]) -> Command:
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
    """A search of ``game`` from one observation; :meth:`run` answers the observer's best
    command (commands are the game's frozen dataclasses: they key the tree)."""

    def __init__(self, game: AnyGame, observation: Observation, rnd: random.Random) -> None:
        self.game = game
        self.observation = observation
        self.sampler = game.sampler(observation)
        self.policy = game.policy()
        self.state_policy = game.state_policy()
        self.hints = game.search_hints()
        self.seat: int = observation["seat"]
        self.rnd = rnd
        self.root = Node(self.seat)
        self.iterations = 0

    def run(self, stop: float, max_iterations: int | None = None) -> Command:
        """Iterate until ``time.perf_counter()`` reaches ``stop`` (or ``max_iterations`` are
        done), then play the most visited command: the best found so far."""
        legal = [self.game.parse_command(c) for c in self.observation["legal_commands"]]
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
        game = self.game
        self.iterations += 1
        state = self.sampler.sample(self.rnd.getrandbits(64))
        node, path = self.root, [self.root]
        while decisions := game.pending(state):
            # Simultaneous decisions (casualties) are taken in order, the observer's first.
            seat = self.seat if node is self.root else decisions[0].seat
            legal = game.legal_commands(state, seat)
            if seat != self.seat and not self.hints.search_opponents:
                game.decide_into(state, self._policy_move(state, seat, legal), trusted=True)
                continue
            if node is not self.root and not node.ranked and self.state_policy is not None:
                values = self.state_policy(state, seat, legal, self.rnd)
                node.ranked = _by_value(values, legal)
            new = node.widen(legal)
            if new is not None:
                child = node.children[new] = Node(seat)
                child.available += 1
                game.decide_into(state, new, trusted=True)
                path.append(child)
                break
            command = node.select(legal)
            node = node.children[command]
            game.decide_into(state, command, trusted=True)
            path.append(node)
        rewards = self.playout(state, stop)
        for visited in path:
            visited.visits += 1
            visited.reward += rewards[visited.seat]

    def _policy_move(self, state: Any, seat: int, legal: Sequence[Command]) -> Command:
        """What the policy (else chance) plays for ``seat``: the playouts' move."""
        if len(legal) == 1:
            return legal[0]
        if self.state_policy is None:
            return self.rnd.choice(legal)
        values = self.state_policy(state, seat, legal, self.rnd)
        return legal[values.index(max(values))]  # the first of the best

    def _rank(self, observation: Observation, legal: list[Command]) -> list[Command]:
        """``legal``, best first by the policy (as they come without one)."""
        if self.policy is None:
            return legal
        return _by_value(self.policy(observation, self.rnd), legal)

    def playout(self, state: Any, stop: float) -> list[float]:
        """The policy (else chance) plays every seat for a while (the game's
        ``rollout_decisions``, then on to the observer's next turn start when the game names
        one), cut short when time is up so the last iteration ends on time; then each seat's
        reward in [0, 1]."""
        game, policy, rnd = self.game, self.state_policy, self.rnd
        # Bound once: the hot loop.
        pending, legal_commands, decide_into = game.pending, game.legal_commands, game.decide_into
        clock = time.perf_counter
        length, turn_start, me = self.hints.rollout_decisions, self.hints.turn_start, self.seat
        for step in range(length if turn_start is None else ROLLOUT_CAP * length):
            decisions = pending(state)
            if not decisions or clock() >= stop:
                break
            seat, kind = decisions[0]
            if step >= length and seat == me and kind == turn_start:
                break
            legal = legal_commands(state, seat)
            if len(legal) == 1 or policy is None:
                decide_into(state, legal[0] if len(legal) == 1 else rnd.choice(legal), trusted=True)
                continue
            values = policy(state, seat, legal, rnd)
            best = legal[values.index(max(values))]  # the first of the best
            decide_into(state, best, trusted=True)
        return rewards(game.evaluate(state), self.hints.reward_scale)


def _by_value(values: Sequence[float], legal: Sequence[Command]) -> list[Command]:
    """``legal``, highest value first."""
    return [c for _, c in sorted(zip(values, legal, strict=True), key=lambda p: -p[0])]


def rewards(values: Sequence[float], scale: float) -> list[float]:
    """A won game is worth 1, a lost one 0; between, the margin over the best rival counts,
    squashed by ``scale`` points (``values``: each seat's expected final total, as the game
    evaluates it)."""
    out = []
    for seat, mine in enumerate(values):
        rival = max(v for other, v in enumerate(values) if other != seat)
        out.append(1 / (1 + math.exp(-(mine - rival) / scale)))
    return out
