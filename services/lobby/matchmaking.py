"""Matchmaking: players queue with their preferences; a table forms when enough of them wait,
or, after ``CARAVEL_MATCH_WAIT_S``, with bots in the free seats. The game starts by itself."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections import defaultdict
from contextlib import suppress
from datetime import UTC, datetime, timedelta
from typing import Any, NamedTuple

import structlog
from fastapi.concurrency import run_in_threadpool
from redis.exceptions import RedisError
from sqlmodel import Session, select

from shared.bus.faults import transient
from shared.contracts import load_json
from shared.games import api
from shared.loops import keep_running
from shared.redis_replies import text

from .db import LobbySeat, LobbyTable, LobbyTicket
from .lobby import Lobby, bot_name
from .tables import LostGames, reconcile_starts, start_table

log = structlog.get_logger("caravel.matchmaking")

FILL_LEVELS = ("greedy", "random")  # the first the game has fills the free seats
RECONCILE_S = 1.0  # how often unfinished starts (and a page of lost games) are looked for


class Group(NamedTuple):
    """What tickets must share to meet at one table."""

    game: str
    ruleset: str
    players: int
    options: str


class Matchmaker:
    def __init__(
        self, lobby: Lobby, wait_s: float, period_s: float = 0.1, reconcile_s: float = RECONCILE_S
    ) -> None:
        self.lobby = lobby
        self.wait_s = wait_s
        self.period_s = period_s
        self.reconcile_s = reconcile_s
        self._next_reconcile = 0.0
        self._starts_due = 0.0  # when an unfinished start can next be due (monotonic)
        self.lost_games = LostGames(lobby)
        # The tickets-queued counter as it was before the last round that left no ticket
        # waiting (None: no such round, or one since left tickets waiting).
        self._idle_at: bytes | None = None

    async def run(self, stop: asyncio.Event) -> None:
        """Form tables every ``period_s`` until ``stop``, and every ``RECONCILE_S`` see
        the starts left unfinished through (:func:`reconcile_starts`) and look for running
        tables whose game is lost (:class:`LostGames`); a failed round is retried."""
        failure = "matchmaking round failed"
        await keep_running(stop, self.round, log, failure, period_s=self.period_s)

    async def round(self) -> list[str]:
        """Form every table that can be formed now (one lobby process at a time); returns
        their ids. Each is started. A round is one Redis read while the queue is known
        empty: no ticket was queued (:meth:`Keys.tickets_queued`) since a round found none
        waiting; every ``reconcile_s`` a round looks in SQL whatever the counter says (a
        ticket whose signal Redis refused), and sees unfinished starts through."""
        reconcile = time.monotonic() >= self._next_reconcile
        queued = await self._queued()
        if not reconcile and queued is not None and queued == self._idle_at:
            return []  # nothing queued since the queue was seen empty
        locked = await self._lock()
        if locked is False:
            return []
        try:
            formed, waiting = await run_in_threadpool(self._form_tables)
            self._idle_at = queued if not waiting else None
            for table_id in formed:
                await self._start(table_id)
            if reconcile:
                self._next_reconcile = time.monotonic() + self.reconcile_s
                await self._reconcile_starts()
                await self._lost_games()
            return formed
        finally:
            if locked:
                with suppress(RedisError, AttributeError):  # it expires by itself
                    await self.lobby.redis.delete(self.lobby.keys.matchmaker())

    async def _reconcile_starts(self) -> None:
        """:func:`reconcile_starts` when an unfinished start can be due: at the time the
        last look said (a start begun since, here or in another lobby, is due no sooner)."""
        now = time.monotonic()
        if now < self._starts_due:
            return
        self._starts_due = now + (await reconcile_starts(self.lobby)).due_in_s

    async def _lost_games(self) -> None:
        """A round of :class:`LostGames`; one that fails (SQL or Redis away) is logged, and
        the next round goes on from the next page."""
        try:
            await self.lost_games.round()
        except Exception:
            log.exception("lost games not looked for")

    async def _queued(self) -> bytes | None:
        """The tickets-queued counter (``b""``: none queued yet; None: Redis did not say,
        so the round looks in SQL)."""
        try:
            value: Any = await self.lobby.redis.get(self.lobby.keys.tickets_queued())
        except Exception as error:  # a closed connection's AttributeError among them
            if not transient(error):
                raise
            return None
        return b"" if value is None else text(value).encode()

    async def _lock(self) -> bool | None:
        """Take the matchmaker's lock: True if taken, False if another process has it, None
        if its shard refuses (a global key: one shard for every partition's tables). The
        round then goes on without it: two rounds never take one ticket (they match under
        SQL row locks, :meth:`_form_tables`), and a start seen through twice is applied
        once; the lock only spares the processes' work (issue 25: that shard without its
        replica refused writes, and no table was formed anywhere)."""
        try:
            return bool(
                await self.lobby.redis.set(self.lobby.keys.matchmaker(), "1", nx=True, px=5000)
            )
        except Exception as error:  # a closed connection's AttributeError among them
            if not transient(error):
                raise
            log.warning("matchmaker lock refused; matching without it", error=repr(error))
            return None

    async def _start(self, table_id: str) -> None:
        """Create a formed table's game; one that fails does not keep the others from
        starting: its start is left unfinished, for :func:`reconcile_starts`."""
        try:
            await start_table(self.lobby, table_id, None)
        except Exception:
            log.exception(
                "a matched table did not start; it will be started again", table_id=table_id
            )

    def _form_tables(self) -> tuple[list[str], bool]:
        """The tables formed now, their free seats given to bots and their start begun (in
        the same transaction as the tickets' matching: no table is left unstarted), and
        whether tickets are left waiting (those another round holds are not seen)."""
        now = datetime.now(UTC)
        with Session(self.lobby.db) as session:
            waiting = session.exec(  # tickets another round holds are not this one's
                select(LobbyTicket)
                .where(LobbyTicket.status == "waiting")
                .order_by(LobbyTicket.created_at)  # type: ignore[arg-type]
                .with_for_update(skip_locked=True)
            ).all()
            groups: dict[Group, list[LobbyTicket]] = defaultdict(list)
            for t in waiting:
                groups[Group(t.game, t.ruleset, t.players, t.options)].append(t)
            formed = []
            left = 0
            for group, tickets in groups.items():
                while len(seated := one_per_name(tickets)[: group.players]) == group.players:
                    formed.append(self._table(session, seated, group))
                    tickets = [t for t in tickets if t not in seated]
                oldest = tickets[0].created_at.replace(tzinfo=UTC) if tickets else None
                if oldest is not None and now - oldest >= timedelta(seconds=self.wait_s):
                    seated = one_per_name(tickets)
                    formed.append(self._table(session, seated, group))
                    tickets = [t for t in tickets if t not in seated]
                left += len(tickets)
            session.commit()
            return formed, left > 0

    def _table(self, session: Session, tickets: list[LobbyTicket], group: Group) -> str:
        table = LobbyTable(
            id=f"t-{uuid.uuid4().hex[:12]}",
            game=group.game,
            ruleset=group.ruleset,
            options=load_json(group.options),  # the tickets' key: their options as JSON
            seats=group.players,
            deadline_s=self.lobby.settings.decision_timeout_s,
            status="running",
            starting_since=datetime.now(UTC),
        )
        session.add(table)
        session.flush()
        for seat, ticket in enumerate(tickets):
            human = LobbySeat(
                table_id=table.id, seat=seat, kind="human", name=ticket.name, holder=ticket.id
            )
            session.add(human)
            ticket.status, ticket.table_id, ticket.seat = "matched", table.id, seat
            session.add(ticket)
        level = fill_level(group.game)
        for seat in range(len(tickets), group.players):
            name = bot_name(level, seat)
            bot = LobbySeat(table_id=table.id, seat=seat, kind="bot", name=name, bot_level=level)
            session.add(bot)
        return table.id


def one_per_name(tickets: list[LobbyTicket]) -> list[LobbyTicket]:
    """The first ticket of each name: a name holds one seat at a table (it is rated once)."""
    first: dict[str, LobbyTicket] = {}
    for ticket in tickets:
        first.setdefault(ticket.name, ticket)
    return list(first.values())


def fill_level(game: str) -> str:
    """The bot level that takes the seats nobody queued for."""
    levels = api.bot_levels(api.get(game))
    return next(level for level in FILL_LEVELS if level in levels)
