"""Seat tokens checked once per lobby process: the claims of verified tokens are kept, and
still expire (issue 24)."""

from __future__ import annotations

import pytest

from services.lobby import tokens


def test_a_kept_claim_still_expires_and_a_refused_token_is_never_kept() -> None:
    key = b"k" * 32
    verify = tokens.Verifier(key, kept=2)
    token = tokens.issue(key, "t-1", 1, "holder", ttl_s=60, now=1000.0)
    claim = verify(token, now=1000.0)
    assert (claim.table_id, claim.seat, claim.holder) == ("t-1", 1, "holder")
    assert verify(token, now=1059.0) is claim  # kept: not verified again
    with pytest.raises(tokens.TokenError) as expired:
        verify(token, now=1061.0)
    assert expired.value.code == "expired_token"
    forged = token[:-2] + ("AA" if not token.endswith("AA") else "BB")
    for _ in range(2):
        with pytest.raises(tokens.TokenError) as refused:
            verify(forged, now=1000.0)
        assert refused.value.code == "invalid_token"
    assert forged not in verify.claims
    other = tokens.issue(b"x" * 32, "t-1", 1, "holder", ttl_s=60, now=1000.0)
    with pytest.raises(tokens.TokenError):  # another key's token
        verify(other, now=1000.0)
    for seat in (2, 3):  # past ``kept``: all dropped at once, then kept again
        verify(tokens.issue(key, "t-1", seat, "h", ttl_s=60, now=1000.0), now=1000.0)
    assert len(verify.claims) == 1
