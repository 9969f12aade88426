"""Seat tokens: proof that the bearer holds one seat of one table, signed with HMAC-SHA256.

A token names the seat's holder (an id drawn when the seat is taken): a seat given up and
taken again has a new holder, so the old token no longer acts for it (the lobby checks the
holder against the seat's row)."""

from __future__ import annotations

import base64
import hashlib
import hmac
import time
from dataclasses import dataclass

from shared.contracts import dump_json, load_json


class TokenError(Exception):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass(frozen=True)
class SeatClaim:
    table_id: str
    seat: int
    expires: int
    holder: str = ""  # "": a token issued before holders existed, for a seat taken then


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def issue(
    key: bytes, table_id: str, seat: int, holder: str, ttl_s: int, now: float | None = None
) -> str:
    """A token for ``holder`` of ``seat`` at ``table_id``, valid for ``ttl_s``."""
    expires = int((time.time() if now is None else now) + ttl_s)
    claims = {"t": table_id, "s": seat, "e": expires, "h": holder}
    payload = _b64(dump_json(claims).encode())
    signature = _b64(hmac.new(key, payload.encode(), hashlib.sha256).digest())
    return f"{payload}.{signature}"


def verify(key: bytes, token: str, now: float | None = None) -> SeatClaim:
    """The claim a token makes, or :class:`TokenError` (malformed, forged or expired)."""
    payload, sep, signature = token.partition(".")
    expected = _b64(hmac.new(key, payload.encode(), hashlib.sha256).digest())
    if not sep or not hmac.compare_digest(signature, expected):
        raise TokenError("invalid_token", "the seat token is not valid")
    try:
        data = load_json(_unb64(payload))
        claim = SeatClaim(str(data["t"]), int(data["s"]), int(data["e"]), str(data.get("h", "")))
    except (ValueError, KeyError, TypeError):
        raise TokenError("invalid_token", "the seat token is not valid") from None
    _check_expiry(claim, now)
    return claim


def _check_expiry(claim: SeatClaim, now: float | None) -> None:
    if claim.expires < (time.time() if now is None else now):
        raise TokenError("expired_token", "the seat token has expired; join again")


class Verifier:
    """:func:`verify` with one key, the claims of the tokens it verified kept (at most
    ``kept``, then all dropped at once): a seat sends the same token with every request,
    and its signature's check, decoding and parse cost about as much as the rest of a
    ``GET /legal`` in the lobby (issue 24). A claim kept is still checked for its expiry
    at each use; a token refused is not kept (checked again each time)."""

    def __init__(self, key: bytes, kept: int = 16384) -> None:
        self.key, self.kept = key, kept
        self.claims: dict[str, SeatClaim] = {}

    def __call__(self, token: str, now: float | None = None) -> SeatClaim:
        claim = self.claims.get(token)
        if claim is None:
            claim = verify(self.key, token, now)
            if len(self.claims) >= self.kept:
                self.claims.clear()
            self.claims[token] = claim
        else:
            _check_expiry(claim, now)
        return claim
