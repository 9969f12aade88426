"""The notices two small bus streams carry, published through FastStream (the JSON in the
entry's body field): a reader of views asking for a game's views (``Keys.view_wants``) and
a seat of a running game whose player changed (``Keys.seat_changes``). Encoded and decoded
by the contracts' codec, as every other value services exchange."""

from __future__ import annotations

from typing import Self

from pydantic import BaseModel, ConfigDict, Field

from .codec import json_bytes, load_json


class _Notice(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    def encode(self) -> bytes:
        """The entry's body."""
        return json_bytes(self.model_dump())

    @classmethod
    def decode(cls, body: bytes) -> Self:
        """The notice an entry's body holds (:class:`pydantic.ValidationError` or
        :class:`ValueError` when it holds none)."""
        return cls.model_validate(load_json(body))


class ViewWant(_Notice):
    """Someone reads a game's views: the views projection projects it, and keeps it
    projected for ``keep_s`` seconds from the entry's time (its id)."""

    game_id: str = Field(description="The game.")
    keep_s: float = Field(ge=0, description="Seconds it stays wanted (0: project it once).")


class SeatChange(_Notice):
    """A running game's seat whose player changed (a human left): the bot players read who
    plays it again."""

    game_id: str = Field(description="The game.")
    seat: int = Field(ge=0, description="The seat.")
