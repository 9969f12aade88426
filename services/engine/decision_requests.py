"""What the engine attaches to a batch's appends: the decision requests of every game it
touched (each pending seat, its legal commands and deadline; a bot seat's, its own view too)
and the snapshots due."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from typing import Any, NamedTuple, cast

from shared.contracts import dump_json, id_json, name_json, new_tuple
from shared.eventstore import Append, GameCodec, Pending
from shared.games import api
from shared.settings import Settings

from .cache import GameCache


@lru_cache(maxsize=65536)
def _command_json(command: api.Command) -> str:
    return dump_json(command.to_dict())


# A command's JSON as the engine lists it in its decision requests: equal JSON, equal
# commands (the type and every field, in their order).
command_json = _command_json

LISTED_KEPT = 65536  # commands whose JSON is kept by identity, at most (then all dropped)


class _ByIdentity:
    """Legal commands' JSON looked up by the commands' identity, in C (``map`` of ``id``
    and ``dict.get``). The rules list the same command objects again and again (they make
    each legal command once); a lookup by value calls the dataclass' ``__hash__``, a Python
    function, for every command of every decision request (10 a request on average), about
    half of the requests' cost. Each command looked up is kept alive here with its JSON,
    so that no other object can take its id while the entry stands; past
    :data:`LISTED_KEPT` all are dropped at once."""

    def __init__(self) -> None:
        self.json: dict[int, str] = {}
        self.kept: list[api.Command] = []

    def __call__(self, commands: Sequence[api.Command]) -> list[str]:
        out = list(map(self.json.get, map(id, commands)))
        if not all(out):  # a JSON text is never empty: a None is a command not seen yet
            if len(self.kept) > LISTED_KEPT:
                self.json.clear()
                self.kept.clear()
            for i, found in enumerate(out):
                if found is None:
                    command = commands[i]
                    out[i] = self.json[id(command)] = _command_json(command)
                    self.kept.append(command)
        return cast(list[str], out)


listed_json = _ByIdentity()

LISTINGS_KEPT = 16384  # listings kept by their commands' identities, at most (then all dropped)


class Listing(NamedTuple):
    """A seat's legal commands as the engine lists them: the commands (kept alive: the
    listing is found by their identities), their JSON joined for the decision request, and
    each command by its JSON, which a command sent as listed is found by
    (:meth:`CachedGame.listed`; read only, shared by every request of the same listing)."""

    commands: tuple[api.Command, ...]
    json: str
    by_json: dict[str, api.Command]


class _Listings:
    """Listings found by the identities of their commands, in order. The rules list the same
    command objects again and again (about four listings in five repeat one seen before in
    The Age of Discovery), so a repeated listing costs a tuple of ids and one look-up instead
    of each command's JSON looked up, the JSON joined and the by-JSON dictionary built
    again. The listing keeps its commands alive, so no other object takes an id of its key
    while it stands; past :data:`LISTINGS_KEPT` all are dropped at once."""

    def __init__(self) -> None:
        self.by_ids: dict[tuple[int, ...], Listing] = {}

    def __call__(self, commands: Sequence[api.Command]) -> Listing:
        key = tuple(map(id, commands))
        found = self.by_ids.get(key)
        if found is None:
            if len(self.by_ids) >= LISTINGS_KEPT:
                self.by_ids.clear()
            texts = listed_json(commands)
            kept = tuple(commands)  # a copy: the rules' list is theirs
            found = Listing(kept, ",".join(texts), dict(zip(texts, kept, strict=True)))
            self.by_ids[key] = found
        return found


listing = _Listings()


def _decision_json(
    game_json: str,
    version: int,
    decision: api.Decision,
    deadline_json: str,
    legal: str,
) -> str:
    """A :class:`DecisionRequest` as JSON (its keys in the model's order), written by hand:
    the engine sends one after every batch for every game it touched. The game's id and the
    deadline come encoded (once per game, once per batch), the legal commands as their JSON
    joined (:class:`Listing`) and a request id is the game's with its version and seat."""
    seat = decision.seat
    return (
        f'{{"request_id":{game_json[:-1]}:{version}:{seat}","game_id":{game_json},'
        f'"version":{version},"seat":{seat},"kind":{name_json(decision.kind)},'
        f'"deadline":{deadline_json},"correlation_id":null,'
        f'"legal_commands":[{legal}]}}'
    )


def own_view_json(
    game: api.AnyGame, state: Any, seat: int, public: api.Observation | None = None
) -> str:
    """``seat``'s own view of ``state`` (the game's ``view`` for it: never another seat's
    hidden values) as JSON, without its legal commands, which its request lists: what a bot
    seat decides from, with no views projection, no view read and no wait for one (issue 24:
    half the services' CPU at a human pace went to projecting and reading bots' views).
    Made from the public view (``public``: already made for another seat of this state) and
    the seat's private part (``Game.private_part``): the legal commands are not listed
    again, a fifth of ``game.view``'s cost."""
    public = game.public_view(state) if public is None else public
    return dump_json(api.merge_views(public, game.private_part(state, seat)))


def bot_view_json(
    game: api.AnyGame, state: Any, seat: int, level: str | None, public: api.Observation | None
) -> tuple[str, api.Observation | None]:
    """What a bot seat of ``level`` (None: a leaver's, played by the fallback) gets in its
    request, and the public view made for it (for the next seat of this state): a greedy
    seat the part of its view the game's policy reads (:meth:`Game.policy_view`, marked
    ``"part": "policy"``; a third of the whole view's size in The Age of Discovery, half in
    Navegador, made without the public view), any other its whole own view
    (:func:`own_view_json`)."""
    if api.reads_policy_view(game, level):
        part = game.policy_view(state, seat)
        if part is not None:
            return dump_json({"part": api.POLICY_VIEW, **part}), public
    public = game.public_view(state) if public is None else public
    return own_view_json(game, state, seat, public), public


def attach(
    appends: Sequence[Append], cache: GameCache, settings: Settings, codec: GameCodec
) -> None:
    """To the last append of every game the batch touched: decision requests for the
    game's state after it, and a snapshot of that state every N events and at the
    game's end (stored by the append itself, so only if the append is made). A pending
    seat the game was loaded with as a bot's (:attr:`CachedGame.bots`) gets its own view
    in its request (a greedy seat, the part of it its policy reads: :func:`bot_view_json`),
    made here from the state at the request's version; the others none."""
    first: dict[str, Append] = {}
    last: dict[str, Append] = {}
    for a in appends:
        first.setdefault(a.game_id, a)
        last[a.game_id] = a
    now = datetime.now(UTC)
    every = settings.snapshot_every
    games = cache.games
    stamp = now.timestamp()
    deadlines: dict[float, str] = {}  # a timeout's deadline JSON, once per batch
    for game_id, a in last.items():
        cached = games.get(game_id)
        if cached is None or cached.game is None:
            continue
        game, state = cached.game, cached.state
        timeout = cached.deadline_s or settings.decision_timeout_s
        deadline = deadlines.get(timeout)
        if deadline is None:
            deadline = deadlines[timeout] = dump_json(
                (now + timedelta(seconds=timeout)).isoformat()
            )
        game_json, version, legal = id_json(game_id), a.version, game.legal_commands
        due = stamp + timeout  # a human seat's clock: the request's deadline
        requests: list[Pending] = []
        listed: dict[int, dict[str, api.Command]] = {}
        bots = cached.bots
        public: api.Observation | None = None  # made once, for the first bot seat pending
        for d in game.pending(state):
            seat = d.seat
            found = listing(legal(state, seat))
            listed[seat] = found.by_json
            request = _decision_json(game_json, version, d, deadline, found.json)
            view = ""
            if seat in bots:
                view, public = bot_view_json(game, state, seat, bots[seat], public)
            requests.append(new_tuple(Pending, (seat, due, request, view)))
        a.decisions = requests
        # The requests are every seat's: kept for /legal too. Asked once per game and batch:
        # the end's hold (``hold_ends``) and the metrics read it from the append.
        a.over = over = game.is_over(state)
        cached.legal = (state, version, listed)  # the next command checked against these
        newly_over = over and not cached.final_recorded
        if newly_over or version // every > first[game_id].expected // every:
            a.snapshot = dump_json(codec.snapshot(state))
