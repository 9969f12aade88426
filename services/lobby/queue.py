"""The matchmaking queue over HTTP: a player asks for a game and polls the ticket until the
matchmaker has seated them (see :mod:`services.lobby.matchmaking`)."""

from __future__ import annotations

import uuid
from typing import Literal

import structlog
from fastapi import APIRouter, Response
from fastapi.concurrency import run_in_threadpool
from pydantic import BaseModel, Field
from sqlmodel import Session, col, delete

from shared.bus.faults import transient
from shared.contracts import key_json
from shared.httpapi import ERRORS, ApiError, Id

from .catalog import players_schema
from .db import LobbyTicket
from .lobby import MAX_SEATS, GameChoice, Lobby, LobbyDep, PlayerName, check_players

router = APIRouter(tags=["queue"])
log = structlog.get_logger("caravel.queue")


class QueueIn(GameChoice):
    name: PlayerName
    players: int = Field(ge=1, le=MAX_SEATS, examples=[4], json_schema_extra=players_schema())


class TicketOut(BaseModel):
    ticket: str
    status: Literal["waiting", "matched"] = Field(
        description="matched: the table, the seat and its token are here."
    )
    table_id: str | None = None
    seat: int | None = None
    token: str | None = Field(default=None, description="Your seat token, once matched.")


@router.post("/queue", status_code=202, response_model=TicketOut, responses=ERRORS)
async def enter_queue(body: QueueIn, lobby: LobbyDep) -> TicketOut:
    """Wait for a game with these preferences: a table forms when enough players wait,
    or after a while with bots in the free seats, and starts by itself."""
    ticket = await run_in_threadpool(_enter, lobby, body)
    await tickets_queued(lobby)  # after the commit: the matchmaker finds the ticket
    return ticket


async def tickets_queued(lobby: Lobby) -> None:
    """Tell the matchmakers a ticket is queued (:meth:`Keys.tickets_queued`). A Redis that
    refuses it delays the match to the matchmaker's next full round (every second) and
    fails no one: the ticket is in SQL."""
    try:
        await lobby.redis.incr(lobby.keys.tickets_queued())
    except Exception as error:  # a closed connection's AttributeError among them
        if not transient(error):
            raise
        log.warning("a queued ticket was not signalled", error=repr(error))


def _enter(lobby: Lobby, body: QueueIn) -> TicketOut:
    game, ruleset, options = body.resolve()
    check_players(game, body.players)
    ticket = LobbyTicket(
        id=f"q-{uuid.uuid4().hex[:16]}",
        name=body.name,
        game=game.name,
        ruleset=ruleset,
        players=body.players,
        options=key_json(options),
    )
    with Session(lobby.db) as session:
        session.add(ticket)
        session.commit()
        return TicketOut(ticket=ticket.id, status="waiting")


@router.get("/queue/{ticket_id}", response_model=TicketOut, responses=ERRORS)
def ticket_status(ticket_id: Id, lobby: LobbyDep) -> TicketOut:
    """Poll a ticket; once matched it carries the table, the seat and its token."""
    with Session(lobby.db) as session:
        ticket = session.get(LobbyTicket, ticket_id)
        if ticket is None:
            raise ApiError(404, "unknown_ticket", f"there is no ticket {ticket_id}")
        out = TicketOut(ticket=ticket.id, status=ticket.status)
        if ticket.table_id is not None and ticket.seat is not None:
            out.table_id, out.seat = ticket.table_id, ticket.seat
            out.token = lobby.token(ticket.table_id, ticket.seat, holder=ticket.id)
        return out


@router.delete("/queue/{ticket_id}", status_code=204, responses=ERRORS)
def leave_queue(ticket_id: Id, lobby: LobbyDep) -> Response:
    """Stop waiting: the ticket is gone (a poll then gets 404). 409 ``ticket_matched`` if a
    table was formed for it first: the seat is the player's (leave the table instead)."""
    with Session(lobby.db) as session:
        waiting = col(LobbyTicket.status) == "waiting"
        query = delete(LobbyTicket).where(col(LobbyTicket.id) == ticket_id, waiting)
        if session.exec(query).rowcount:
            session.commit()
            return Response(status_code=204)
        ticket = session.get(LobbyTicket, ticket_id)
    if ticket is None:
        raise ApiError(404, "unknown_ticket", f"there is no ticket {ticket_id}")
    message = f"ticket {ticket_id} is matched: leave table {ticket.table_id} instead"
    raise ApiError(409, "ticket_matched", message, {"table_id": ticket.table_id})
