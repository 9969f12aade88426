"""The Age of Discovery as the event store sees it: build, evolve and snapshot a state."""

from __future__ import annotations

import json
from typing import Any

from shared.contracts import EventEnvelope
from shared.games import age_of_discovery as aod


class AgeOfDiscoveryCodec:
    """Bridges envelopes and the rules core; compiled rules are cached per ruleset+options."""

    def __init__(self) -> None:
        self._rulesets: dict[str, aod.Ruleset] = {}
        self._rules: dict[str, aod.Rules] = {}

    def rules(self, ruleset: str, options: dict[str, Any] | None) -> aod.Rules:
        key = json.dumps([ruleset, options or {}], sort_keys=True)
        rules = self._rules.get(key)
        if rules is None:
            if ruleset not in self._rulesets:
                self._rulesets[ruleset] = aod.load_ruleset(ruleset)
            rules = self._rules[key] = aod.compile_rules(self._rulesets[ruleset], options)
        return rules

    def initial(self, first: EventEnvelope) -> aod.GameState:
        if first.type != "game_created":
            raise ValueError(f"{first.game_id}: a log starts with game_created, not {first.type}")
        rules = self.rules(first.data["ruleset"], first.data["options"])
        return aod.blank_state(rules, len(first.data["players"]))

    def apply(self, state: aod.GameState, event: EventEnvelope) -> None:
        aod.apply(state, to_event(event))

    def snapshot(self, state: aod.GameState) -> dict[str, Any]:
        return state.to_snapshot()

    def restore(self, snapshot: dict[str, Any]) -> aod.GameState:
        rules = self.rules(snapshot["ruleset"], snapshot["options"])
        return aod.GameState.from_snapshot(rules, snapshot)


def to_event(envelope: EventEnvelope) -> aod.Event:
    return aod.Event(envelope.type, envelope.data, envelope.secret, envelope.visibility)
