"""The analytics a designer trusts: every rate with its n and a 95% Wilson interval, win
rates by turn position and by side against the fair share with a significance test, fact
lifts and breakdown means with intervals, and A/B comparisons of two filters.

Everything is read from the flat results table (:mod:`.flat`) through a :class:`Filter`,
checked against what the game and the table hold (:func:`check`): an unknown game, option,
value, seat kind, ruleset or experiment is refused with the allowed values named.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

from pydantic import ValidationError
from sqlalchemy import ColumnElement, Connection, Table, and_, func, select

from shared.contracts import key_json
from shared.games import api
from shared.games.api import analytics
from shared.intervals import wilson

from .cells import CELLS, FINE, SECOND, selects
from .flat import EXPERIMENTS, HOUR, RESULTS, as_utc

Z = 1.96  # 95%
HASH = re.compile(r"^[0-9a-f]{16}$")
SEAT_MIXES = ("humans", "bots")
IMPORTED = ("exclude", "include", "only")
"""Games loaded by `caravel games import`: left out by default (played elsewhere, under a
server and players this site's figures are not about), counted with ``include``, or
alone with ``only``."""


class BadFilter(ValueError):
    """A filter the data cannot answer: ``field`` names it, ``allowed`` what it may be."""

    def __init__(self, field_name: str, message: str, allowed: Sequence[Any]) -> None:
        super().__init__(message)
        self.field = field_name
        self.allowed = list(allowed)


@dataclass(frozen=True)
class Filter:
    """Which seats of which finished games a figure counts."""

    game: str
    ruleset: str | None = None  # a ruleset name or its 16-hex content hash
    options: Mapping[str, Any] = field(default_factory=dict)
    players: int | None = None
    seat_kind: str | None = None  # human, bot:<level>
    seats: str | None = None  # humans (every seat a human), bots (every seat a bot)
    since: datetime | None = None
    until: datetime | None = None
    experiment: str | None = None
    imported: str = IMPORTED[0]


def seat_kinds(game: api.AnyGame) -> list[str]:
    return ["human", *(f"bot:{level}" for level in api.bot_levels(game))]


def experiments(conn: Connection, game: str | None = None) -> list[dict[str, Any]]:
    """The lab's experiments (of one game), newest first."""
    query = select(EXPERIMENTS).order_by(EXPERIMENTS.c.started_at.desc())
    if game is not None:
        query = query.where(EXPERIMENTS.c.game == game)
    return [dict(row._mapping) for row in conn.execute(query)]


def check(conn: Connection | None, f: Filter) -> Filter:
    """``f`` with its options typed by the game, or :class:`BadFilter` naming the field."""
    try:
        game = api.get(f.game)
    except api.UnknownGame as e:
        raise BadFilter("game", str(e), e.known) from None
    ruleset = game.default_ruleset
    if f.ruleset is not None and not HASH.match(f.ruleset):
        if f.ruleset not in game.rulesets():
            raise BadFilter(
                "ruleset",
                f"unknown ruleset {f.ruleset!r}: a ruleset name or a 16-hex content hash",
                game.rulesets(),
            )
        ruleset = f.ruleset
    options = _typed_options(game, ruleset, f.options)
    if f.players is not None and not game.min_players <= f.players <= game.max_players:
        allowed = list(range(game.min_players, game.max_players + 1))
        raise BadFilter("players", f"{game.title} takes {allowed[0]} to {allowed[-1]}", allowed)
    if f.seat_kind is not None and f.seat_kind not in seat_kinds(game):
        raise BadFilter("seat_kind", f"unknown seat kind {f.seat_kind!r}", seat_kinds(game))
    if f.seats is not None and f.seats not in SEAT_MIXES:
        raise BadFilter("seats", f"unknown seats {f.seats!r}", SEAT_MIXES)
    if f.imported not in IMPORTED:
        raise BadFilter("imported", f"unknown imported {f.imported!r}", IMPORTED)
    if f.experiment is not None and conn is not None:
        known = [e["name"] for e in experiments(conn, game.name)]
        if f.experiment not in known:
            raise BadFilter("experiment", f"no experiment {f.experiment!r} of {f.game}", known)
    return Filter(**{**asdict(f), "options": options})


def _typed_options(game: api.AnyGame, ruleset: str, given: Mapping[str, Any]) -> dict[str, Any]:
    """Options as the game types them (``"30"`` → 30), each key and value checked."""
    schema = game.options_model(ruleset).model_json_schema().get("properties", {})
    out = {}
    for key, value in given.items():
        if key not in schema:
            raise BadFilter("options", f"unknown option {key!r}", sorted(schema))
        choices = schema[key].get("enum") or (
            [schema[key]["const"]] if "const" in schema[key] else []
        )
        typed = next((c for c in choices if str(c) == str(value)), None)
        if typed is None:
            try:
                typed = game.options_model(ruleset).model_validate({key: value}).model_dump()[key]
            except ValidationError:
                raise BadFilter("options", f"option {key}: no value {value!r}", choices) from None
        out[key] = typed
    return out


def where(f: Filter, table: Table = RESULTS, grain: str | None = None) -> ColumnElement[bool]:
    """The SQL condition of a checked filter, on the flat table or on the cells (the
    finer cells: of ``grain``, minute or second; a period's ends then on its spans)."""
    c = table.c
    parts: list[ColumnElement[bool]] = [c.game == f.game]
    if table is FINE:
        parts.append(c.grain == grain)
    if f.ruleset is not None:
        parts.append((c.ruleset_hash if HASH.match(f.ruleset) else c.ruleset) == f.ruleset)
    for key, value in sorted(f.options.items()):
        parts.append(c.options.contains(f"{key_json(key)}: {key_json(value)}"))
    if f.players is not None:
        parts.append(c.players == f.players)
    if f.seat_kind is not None:
        parts.append(c.seat_kind == f.seat_kind)
    if f.seats == "humans":
        parts.append(c.humans == c.players)
    elif f.seats == "bots":
        parts.append(c.humans == 0)
    if f.experiment is not None:
        parts.append(c.experiment == f.experiment)
    if f.imported != "include":
        parts.append(c.imported == (f.imported == "only"))
    for moment, after in ((f.since, True), (f.until, False)):
        if moment is None:
            continue
        if table is CELLS:
            hour = moment.astimezone(UTC).strftime(HOUR)
            parts.append(c.finished_hour >= hour if after else c.finished_hour < hour)
        elif table is FINE:
            start = moment.astimezone(UTC).strftime(SECOND)[: 16 if grain == "minute" else 19]
            parts.append(c.start >= start if after else c.start < start)
        else:
            parts.append(c.finished_at >= moment if after else c.finished_at < moment)
    return and_(*parts)


Sums = list[tuple[int, str, str, int, int, int, int]]
"""(players, dim, value, n, wins, total, squares) rows: what every figure is made of."""


def sums(conn: Connection, f: Filter) -> Sums:
    """The filter's sums: the whole hours of its period from the hourly cells, the whole
    minutes left at either end from the minute cells, the whole seconds left from the
    second cells, and only what is left then (less than a second at each end) from the
    flat table, by its finish-time index: whatever its ends, a period costs a few reads of
    cells and two reads of part of a second's games at most, never a scan of an hour's.
    One row per (players, dim, value)."""
    f = replace(f, since=as_utc(f.since), until=as_utc(f.until))
    merged: dict[tuple[int, str, str], list[int]] = {}
    for players, dim, value, *numbers in _sums(conn, f, 0):
        held = merged.setdefault((players, dim, value), [0, 0, 0, 0])
        for i, number in enumerate(numbers):
            held[i] += number
    # a value seen only in games taken away again (see _second_end) has n 0: the flat
    # table has no row of it
    return [(*key, n, w, t, q) for key, (n, w, t, q) in merged.items() if n]


LEVELS: tuple[tuple[str | None, timedelta], ...] = (
    (None, timedelta(hours=1)),  # the hourly cells
    ("minute", timedelta(minutes=1)),
    ("second", timedelta(seconds=1)),
)
EPOCH = datetime(2000, 1, 1, tzinfo=UTC)


def _sums(conn: Connection, f: Filter, level: int) -> Sums:
    """The sums of ``f`` from the cells of ``LEVELS[level]`` and finer: its whole spans
    there, its ends from the next level (after the last: the flat table)."""
    if level == len(LEVELS):
        return _flat_sums(conn, f)
    grain, span = LEVELS[level]
    start = _ceil(f.since, span) if f.since is not None else None
    end = _floor(f.until, span) if f.until is not None else None
    if start is not None and end is not None and start >= end:  # within one span
        return _sums(conn, f, level + 1)
    out = _cell_sums(conn, replace(f, since=start, until=end), grain)
    last = level == len(LEVELS) - 1
    if start is not None and f.since is not None and start != f.since:
        rest = replace(f, until=start)
        out += _second_end(conn, rest, start - span, after=True) if last else []
        out += [] if last else _sums(conn, rest, level + 1)
    if end is not None and f.until is not None and end != f.until:
        rest = replace(f, since=end)
        out += _second_end(conn, rest, end, after=False) if last else []
        out += [] if last else _sums(conn, rest, level + 1)
    return out


def _second_end(conn: Connection, f: Filter, second: datetime, *, after: bool) -> Sums:
    """A period's end inside ``second`` (``f``: that part of the second, ``after`` the
    period's start or before its end): its games from
    the flat table, or, when fewer games lie in the other part, the second's cells minus
    the other part's games (counted first on the finish-time index): at most half a
    second's games are read."""
    whole = replace(f, since=second, until=second + timedelta(seconds=1))
    other = replace(whole, since=f.until) if not after else replace(whole, until=f.since)
    if _games(conn, other) >= _games(conn, f):
        return _flat_sums(conn, f)
    taken = [(p, d, v, -n, -w, -t, -q) for p, d, v, n, w, t, q in _flat_sums(conn, other)]
    return _cell_sums(conn, whole, "second") + taken


def _games(conn: Connection, f: Filter) -> int:
    """How many flat rows of ``f``'s game lie in its period (the index alone)."""
    c = RESULTS.c
    query = select(func.count()).where(c.game == f.game)
    if f.since is not None:
        query = query.where(c.finished_at >= f.since)
    if f.until is not None:
        query = query.where(c.finished_at < f.until)
    return int(conn.execute(query).scalar_one())


def _floor(moment: datetime, span: timedelta) -> datetime:
    return moment - (moment - EPOCH) % span


def _ceil(moment: datetime, span: timedelta) -> datetime:
    floor = _floor(moment, span)
    return floor if floor == moment else floor + span


def _cell_sums(conn: Connection, f: Filter, grain: str | None) -> Sums:
    table = CELLS if grain is None else FINE
    c = table.c
    query = (
        select(
            c.players,
            c.dim,
            c.value,
            func.sum(c.n),
            func.sum(c.wins),
            func.sum(c.total),
            func.sum(c.squares),
        )
        .where(where(f, table, grain))
        .group_by(c.players, c.dim, c.value)
    )
    return [tuple(map(_plain_number, row)) for row in conn.execute(query)]


def _flat_sums(conn: Connection, f: Filter) -> Sums:
    out: Sums = []
    for query in selects(where(f), [RESULTS.c.players], f.game):
        out += [tuple(map(_plain_number, row)) for row in conn.execute(query)]
    return out


def _plain_number(value: Any) -> Any:
    """SQL sums as Python ints (PostgreSQL answers Decimal)."""
    return int(value) if isinstance(value, Decimal) else value


# --- the figures --------------------------------------------------------------------------


def rate(wins: float, n: int) -> dict[str, Any]:
    low, high = wilson(wins, n)
    return {"n": n, "wins": int(wins), "rate": wins / n if n else 0.0, "low": low, "high": high}


def against(wins: int, n: int, expected: float, tests: int) -> dict[str, Any]:
    """A rate against its fair share ``expected``: the two-sided p-value of the normal
    approximation to the binomial, significant below 0.05 / ``tests`` (Bonferroni)."""
    out = rate(wins, n)
    sd = math.sqrt(n * expected * (1 - expected)) if n else 0.0
    z = (wins - n * expected) / sd if sd else 0.0
    p = math.erfc(abs(z) / math.sqrt(2))
    out.update(expected=expected, z=z, p_value=p, significant=n > 0 and p < 0.05 / max(tests, 1))
    return out


def difference(a: Mapping[str, Any], b: Mapping[str, Any]) -> dict[str, Any]:
    """``a``'s rate minus ``b``'s with Newcombe's 95% interval (from the two Wilson
    intervals); significant when it excludes 0."""
    d = a["rate"] - b["rate"]
    low = d - math.sqrt((a["rate"] - a["low"]) ** 2 + (b["high"] - b["rate"]) ** 2)
    high = d + math.sqrt((a["high"] - a["rate"]) ** 2 + (b["rate"] - b["low"]) ** 2)
    ok = a["n"] > 0 and b["n"] > 0
    se = math.sqrt(
        sum(x["rate"] * (1 - x["rate"]) / x["n"] for x in (a, b) if x["n"]) if ok else 0.0
    )
    return _difference(d, low, high, se, ok)


def _difference(d: float, low: float, high: float, se: float, ok: bool) -> dict[str, Any]:
    """A difference with its interval and p-value; none is significant without data."""
    return {
        "diff": d,
        "low": low,
        "high": high,
        "p_value": _p(d, se) if ok else 1.0,
        "significant": ok and (low > 0 or high < 0),
    }


def _p(diff: float, se: float) -> float:
    """The two-sided p-value of a difference over its standard error (normal)."""
    if se == 0:
        return 1.0 if diff == 0 else 0.0
    return math.erfc(abs(diff / se) / math.sqrt(2))


def holm(rows: Sequence[dict[str, Any]], alpha: float = 0.05) -> None:
    """Holm-Bonferroni over a family of differences: each row gets ``p_adjusted`` (Holm's
    step-down p) and ``significant`` (``p_adjusted < alpha``), so that among many
    comparisons the chance of any false alarm stays ``alpha``; the interval stays the
    unadjusted 95% one."""
    ordered = sorted(rows, key=lambda r: r["p_value"])
    running = 0.0
    for rank, row in enumerate(ordered):
        running = max(running, min(1.0, (len(ordered) - rank) * row["p_value"]))
        row["p_adjusted"] = running
        row["significant"] = running < alpha


def mean(n: int, total: float, squares: float) -> dict[str, Any]:
    """A mean with its 95% normal interval, from a count, a sum and a sum of squares."""
    if n == 0:
        return {"n": 0, "mean": 0.0, "sd": 0.0, "low": 0.0, "high": 0.0}
    m = total / n
    sd = math.sqrt(max(0.0, squares / n - m * m) * n / (n - 1)) if n > 1 else 0.0
    half = Z * sd / math.sqrt(n)
    return {"n": n, "mean": m, "sd": sd, "low": m - half, "high": m + half}


def mean_difference(a: Mapping[str, Any], b: Mapping[str, Any]) -> dict[str, Any]:
    """Welch's difference of two means with its 95% normal interval."""
    d = a["mean"] - b["mean"]
    se = math.sqrt(
        (a["sd"] ** 2 / a["n"] if a["n"] else 0.0) + (b["sd"] ** 2 / b["n"] if b["n"] else 0.0)
    )
    ok = a["n"] > 1 and b["n"] > 1
    return _difference(d, d - Z * se, d + Z * se, se, ok)


def _rates(rows: Sums, dim: str, key: Any = str) -> list[dict[str, Any]]:
    """Rates per value of one seat dimension against the fair share (the mean of
    1/players over its seats)."""
    counted: dict[str, list[float]] = {}
    for players, d, value, n, wins, _, _ in rows:
        if d == dim:
            held = counted.setdefault(value, [0, 0, 0.0])
            held[0] += n
            held[1] += wins
            held[2] += n / players
    tests = len(counted)
    return [
        {"value": key(v), **against(int(w), int(n), fair / n, tests)}
        for v, (n, w, fair) in sorted(counted.items(), key=lambda kv: key(kv[0]))
    ]


def _means(rows: Sums, game: str) -> dict[str, dict[str, Any]]:
    """The mean of the total, each breakdown column of the game and the decisions."""
    summed: dict[str, list[int]] = {}
    for _, d, value, n, _, total, squares in rows:
        if d == "mean":
            held = summed.setdefault(value, [0, 0, 0])
            held[0] += n
            held[1] += total
            held[2] += squares
    names = ["total", *analytics.breakdown_parts(game), "decisions"]
    return {name: mean(*summed.get(name, [0, 0, 0])) for name in names}


def _lifts(rows: Sums, seats: int, wins: int) -> list[dict[str, Any]]:
    """Per fact (kind, subject): the owners' win rate against the other seats'."""
    owned: dict[str, list[int]] = {}
    for _, d, value, n, won, _, _ in rows:
        if d == "fact":
            held = owned.setdefault(value, [0, 0])
            held[0] += n
            held[1] += won
    out = []
    for fact, (n, owner_wins) in sorted(owned.items()):
        kind, _, subject = fact.partition("/")
        owners = rate(owner_wins, n)
        rest = rate(wins - owner_wins, seats - n)
        lift = difference(owners, rest)
        out.append({"kind": kind, "subject": subject, "owners": owners, "rest": rest, "lift": lift})
    return out


def figures(conn: Connection, f: Filter) -> dict[str, Any]:
    """Every figure of a checked filter."""
    rows = sums(conn, f)
    positions = _rates(rows, "position", int)
    seats = sum(p["n"] for p in positions)
    wins = sum(p["wins"] for p in positions)
    return {
        "filter": {k: _plain(v) for k, v in asdict(f).items()},
        "games": positions[0]["n"] if positions else 0,
        "seats": seats,
        "overall": rate(wins, seats),
        "turn_position": positions,
        "side": _rates(rows, "side"),
        "seat_kind": _rates(rows, "kind"),
        "players": _rates(rows, "players", int),
        "means": _means(rows, f.game),
        "facts": _lifts(rows, seats, wins),
    }


def _plain(value: Any) -> Any:
    return value.isoformat() if isinstance(value, datetime) else value


CORRECTION = "holm"


def compare(a: Mapping[str, Any], b: Mapping[str, Any]) -> dict[str, Any]:
    """Every figure of two filters' :func:`figures` side by side with A - B, its interval
    and p-value: turn positions, sides, seat kinds, breakdown means and fact lifts. A
    difference is ``significant`` after Holm-Bonferroni over all of them (:func:`holm`):
    dozens of facts compared at 5% each would flag some by chance alone."""
    out: dict[str, Any] = {"a": a["filter"], "b": b["filter"], "games": [a["games"], b["games"]]}
    for part in ("turn_position", "side", "seat_kind", "players"):
        mine, theirs = ({r["value"]: r for r in x[part]} for x in (a, b))
        out[part] = [
            {"value": v, "a": mine[v], "b": theirs[v], **difference(mine[v], theirs[v])}
            for v in mine
            if v in theirs
        ]
    out["means"] = {
        name: {"a": m, "b": b["means"][name], **mean_difference(m, b["means"][name])}
        for name, m in a["means"].items()
        if name in b["means"]
    }
    lifts = {(x["kind"], x["subject"]): x for x in b["facts"]}
    out["facts"] = [
        {
            "kind": x["kind"],
            "subject": x["subject"],
            "a": x["owners"],
            "b": lifts[(x["kind"], x["subject"])]["owners"],
            **difference(x["owners"], lifts[(x["kind"], x["subject"])]["owners"]),
        }
        for x in a["facts"]
        if (x["kind"], x["subject"]) in lifts
    ]
    family = [
        *(r for part in ("turn_position", "side", "seat_kind", "players") for r in out[part]),
        *out["means"].values(),
        *out["facts"],
    ]
    holm(family)
    out["correction"] = {"method": CORRECTION, "alpha": 0.05, "tests": len(family)}
    return out
