"""The golden playthroughs (:mod:`tests.games.playthroughs`): every registered game's random
games at fixed seeds play exactly as recorded, event by event, to the recorded final hash;
and each stored log replays to that hash (a log written by an earlier version still reads).
A failure names the first event that differs; when the change is meant, regenerate."""

from __future__ import annotations

import pytest

from shared.games import api

from .playthroughs import REGENERATE, SETUPS, Playthrough, line, play, read_index, read_log

INDEX = read_index()


def _id(p: Playthrough) -> str:
    return f"{p.game}-{p.players}p-{p.seed}"


def test_every_game_has_its_playthroughs() -> None:
    """A game registered later gets playthroughs when they are regenerated: none missing."""
    kept = {(p.game, p.players, p.seed) for p in INDEX}
    wanted = {(name, players, seed) for name in api.names() for players, seed in SETUPS}
    assert kept == wanted, f"playthroughs missing or stale: run {REGENERATE}"


@pytest.mark.parametrize("kept", INDEX, ids=_id)
def test_a_playthrough_plays_as_recorded(kept: Playthrough) -> None:
    now, events = play(kept.game, kept.players, kept.seed)
    stored = read_log(kept.path)
    for i, (old, new) in enumerate(zip(stored, events, strict=False)):
        assert line(new) == line(old), (
            f"{_id(kept)}: event {i + 1} differs; if the rules change is meant, run {REGENERATE}"
        )
    assert now == kept, f"{_id(kept)} played otherwise; if meant, run {REGENERATE}"


@pytest.mark.parametrize("kept", INDEX, ids=_id)
def test_a_stored_playthrough_replays_to_its_hash(kept: Playthrough) -> None:
    game = api.get(kept.game)
    assert game.state_hash(game.replay(read_log(kept.path))) == kept.final_hash
