"""The scripts that admit a client's request before it reaches the engine: a rate's token
bucket (``take``) and a seat's move (``seat``: its holder, and a reused command id). A
socket's move sends both in one pipeline (:class:`~shared.bus.scripts.Batch`): one round
trip, on a cluster one per node (a bucket is the client's, a seat's keys its game's slot).
"""

from __future__ import annotations

from .scripts import Library

# KEYS: 1 bucket. ARGV: 1 tokens per second, 2 burst. Returns the seconds to wait before a
# token is there ("0": one was taken). Redis's clock, so replicas agree on the time.
_TAKE = """
local rate, burst = tonumber(ARGV[1]), tonumber(ARGV[2])
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local bucket = redis.call('HMGET', KEYS[1], 'tokens', 'at')
local tokens = tonumber(bucket[1]) or burst
local at = tonumber(bucket[2]) or now
tokens = math.min(burst, tokens + math.max(0, now - at) * rate)
local wait = 0
if tokens >= 1 then tokens = tokens - 1 else wait = (1 - tokens) / rate end
redis.call('HSET', KEYS[1], 'tokens', tostring(tokens), 'at', tostring(now))
redis.call('EXPIRE', KEYS[1], math.ceil(burst / rate) + 1)
return tostring(wait)
"""

# KEYS: 1 the game's holders hash, 2 the command id's digest key. ARGV: 1 the seat, 2 its
# claimed holder, 3 the command's digest ("": no client id to check), 4 the digest's TTL.
# Returns "unknown" (the seat is not cached: nothing written), "not_seated" (another holder
# or none, "-"), "reused" (the id came before with another digest), "set" (the digest was
# stored now) or "ok" (a retry of the same command, or no id to check).
_SEAT = """
local held = redis.call('HGET', KEYS[1], ARGV[1])
if not held then return 'unknown' end
if held == '-' or held ~= ARGV[2] then return 'not_seated' end
if ARGV[3] == '' then return 'ok' end
if redis.call('SET', KEYS[2], ARGV[3], 'NX', 'EX', ARGV[4]) then return 'set' end
local first = redis.call('GET', KEYS[2])
if first and first ~= ARGV[3] then return 'reused' end
return 'ok'
"""

SCRIPTS = Library("admission", {"take": _TAKE, "seat": _SEAT})
