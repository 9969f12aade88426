"""The scripts that admit a client's request before it reaches the engine: a rate's token
bucket (``take``), a seat's move (``seat``: its holder, and a reused command id), and both
with the command's append when they pass (``admit``).

A socket's move on one Redis is one ``admit`` call, sent with the first wait for the
engine's answer (:meth:`~shared.bus.CommandSender.execute_admitted`): one round trip. On a
cluster the bucket (the client's) and the seat's keys (its game's slot) are on different
shards: ``take`` and ``seat`` go in one pipeline (:class:`~shared.bus.scripts.Batch`), one
round trip per node, and the command follows in another.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .faststream_ext import BODY
from .scripts import Library, Script

# take(bucket, tokens per second, burst): the seconds to wait before a token is there (0: one
# was taken). Redis's clock, so replicas agree on the time. The bucket is one string,
# "tokens at", written with its TTL by one SET (a hash took an HSET and an EXPIRE: one more
# command on every move); a bucket of another type (a hash an older lobby wrote, for at most
# its TTL) reads as full, as a missing one does, and is replaced.
_BUCKET = """
local function take(key, rate, burst)
  local t = redis.call('TIME')
  local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
  local held = redis.pcall('GET', key)
  local tokens, at = burst, now
  if type(held) == 'string' then
    local space = string.find(held, ' ', 1, true)
    if space then
      tokens = tonumber(string.sub(held, 1, space - 1)) or burst
      at = tonumber(string.sub(held, space + 1)) or now
    end
  end
  tokens = math.min(burst, tokens + math.max(0, now - at) * rate)
  local wait = 0
  if tokens >= 1 then tokens = tokens - 1 else wait = (1 - tokens) / rate end
  local ttl = math.ceil(burst / rate) + 1
  redis.call('SET', key, tostring(tokens) .. ' ' .. tostring(now), 'EX', ttl)
  return wait
end
"""

# holder_refusal(holders, seat, claimed holder): "unknown" (the seat is not cached), or
# "not_seated" (another holder or none, "-"), or nil (the claim holds the seat).
# digest_check(digest key, digest or "", TTL): "reused" (the id came before with another
# digest), "set" (the digest was stored now) or "ok" (a retry of the same command, or no id).
_SEAT_CHECKS = """
local function holder_refusal(key, seat, holder)
  local held = redis.call('HGET', key, seat)
  if not held then return 'unknown' end
  if held == '-' or held ~= holder then return 'not_seated' end
  return nil
end
local function digest_check(key, digest, ttl)
  if digest == '' then return 'ok' end
  if redis.call('SET', key, digest, 'NX', 'EX', ttl) then return 'set' end
  local first = redis.call('GET', key)
  if first and first ~= digest then return 'reused' end
  return 'ok'
end
"""

# KEYS: 1 bucket. ARGV: 1 tokens per second, 2 burst. Returns the seconds to wait ("0": a
# token was taken).
_TAKE = _BUCKET + "return tostring(take(KEYS[1], tonumber(ARGV[1]), tonumber(ARGV[2])))"

# KEYS: 1 the game's holders hash, 2 the command id's digest key. ARGV: 1 the seat, 2 its
# claimed holder, 3 the command's digest ("": no client id to check), 4 the digest's TTL.
# Returns "unknown" (nothing written), "not_seated", "reused", "set" or "ok".
_SEAT = (
    _SEAT_CHECKS
    + "return holder_refusal(KEYS[1], ARGV[1], ARGV[2]) or digest_check(KEYS[2], ARGV[3], ARGV[4])"
)

# KEYS: ``take``'s, ``seat``'s, then the command stream. ARGV: ``take``'s, ``seat``'s, then
# the command's body. The token is taken (as ``take`` alone would), the seat checked; with
# a token there and the id not reused, the command is appended as a broker publishes it
# (its body in the ``BODY`` field) and the reply is {"sent", "0"}. Otherwise nothing else is
# written and the reply is {the seat's verdict, the seconds to wait}, in the order a move is
# refused (seat, rate, id): "unknown" and "not_seated" with the bucket's wait, "ok" with a
# wait (no token; the id not looked at), "reused" with "0".
_ADMIT = (
    _BUCKET
    + _SEAT_CHECKS
    + f"""
local wait = take(KEYS[1], tonumber(ARGV[1]), tonumber(ARGV[2]))
local refused = holder_refusal(KEYS[2], ARGV[3], ARGV[4])
if refused then return {{refused, tostring(wait)}} end
if wait > 0 then return {{'ok', tostring(wait)}} end
if digest_check(KEYS[3], ARGV[5], ARGV[6]) == 'reused' then return {{'reused', '0'}} end
redis.call('XADD', KEYS[4], '*', '{BODY.decode()}', ARGV[7])
return {{'sent', '0'}}
"""
)

SCRIPTS = Library("admission", {"take": _TAKE, "seat": _SEAT, "admit": _ADMIT})
SENT = b"sent"  # the first item of ``admit``'s reply when it appended the command

Call = tuple[Script, Sequence[Any], Sequence[Any]]


def admit(take: Call, seat: Call, stream: str, body: bytes) -> Call:
    """The ``admit`` call of a ``take`` call and a ``seat`` call: both, then the append of
    ``body`` to ``stream`` when they pass."""
    (taking, bucket, rate), (seating, seat_keys, seat_args) = take, seat
    if taking is not SCRIPTS["take"] or seating is not SCRIPTS["seat"]:
        raise ValueError("admit combines a take call and a seat call")
    return SCRIPTS["admit"], [*bucket, *seat_keys, stream], [*rate, *seat_args, body]
