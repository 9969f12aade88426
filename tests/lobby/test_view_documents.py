"""The views projection's documents, for every registered game (pytest + hypothesis): the
public view stored once per game version and each seat's part assemble to exactly the
game's view for that seat, and none of them carries a hidden value."""

from __future__ import annotations

import json

from hypothesis import strategies as st

from shared.views import assemble, view_documents

from ..games.strategies import SEEDS, Play, per_game_property, random_game_length, specs

CHECKS = 6  # positions checked per game: spread over its decisions, the end included


def check_documents(play: Play, twin_seed: int) -> None:
    """Every seat's view assembled from the public document and its own part is the game's
    view for it; the spectator's is the public one. Each equals the same view of a twin
    whose hidden values are resampled (``determinize``): the documents show nothing the
    seat may not see, another seat's hidden values included."""
    game, state = play.game, play.state
    documents = {k: json.loads(v) for k, v in view_documents(game, state, play.players).items()}
    assert set(documents) == {"public", *(f"seat:{seat}" for seat in play.seats)}
    twin = game.determinize(state, twin_seed)
    for seat in [None, *play.seats]:
        part = None if seat is None else documents[f"seat:{seat}"]
        view = assemble(dict(documents["public"]), part)
        assert view == game.view(state, seat)
        assert view == game.view(twin, seat)
    for seat in play.seats:  # a part holds only what its seat's view changes
        changed = documents[f"seat:{seat}"]["set"]
        assert all(documents["public"].get(k) != v for k, v in changed.items())


@per_game_property(4, data=st.data(), twin_seed=SEEDS)
def test_stored_view_documents_are_each_seats_view_and_hide_what_it_may_not_see(
    name: str, data: st.DataObject, twin_seed: int
) -> None:
    """At positions spread over a whole random game, and at its end, the documents the
    projection stores assemble to each seat's view and the spectator's, and hide the
    hidden values."""
    play: Play = data.draw(specs(name)).start()
    every = max(1, round(random_game_length(name) / CHECKS))
    for step, (_, _, command) in enumerate(play.choices()):
        if step % every == 0:
            check_documents(play, twin_seed + step)
        play.apply(command)
    check_documents(play, twin_seed)
