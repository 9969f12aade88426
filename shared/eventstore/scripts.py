"""The event store's Lua scripts, loaded as one Redis Function library: appending a
command's events, recording a command that appends nothing, marking a game finished,
forgetting an archived game's log and storing snapshots (see :mod:`.store`); and the
engines' leases on the partitions (:data:`LEASES`), which decide who may append to them."""

from __future__ import annotations

from shared.bus.scripts import Library

_ANSWER = """
-- A command's answer, stored once: a result list holds the first answer given (what its
-- sender reads) and no other. The same command can be decided again after its append was
-- made (a call whose reply was lost, an entry handled twice, the same command sent twice):
-- that second outcome, a duplicate, must not add a second answer. RPUSH tells whether the
-- list was there (a length above 1): the answer pushed is then taken back, which spares
-- an EXISTS on every command (the list is almost always new).
local function answer(key, json, ttl)
  if redis.call('RPUSH', key, json) == 1 then
    redis.call('EXPIRE', key, tonumber(ttl))
  else
    redis.call('RPOP', key)
  end
end
"""

_APPEND = (
    _ANSWER
    + """
-- Appends of several commands, each as it would be alone, in order: one call per batch
-- (per partition on a cluster, whose keys share a slot), one reply of (status, version)
-- pairs. ARGV[1] is the number of appends, ARGV[2] the engine's consumer group, ARGV[3]
-- the results' ttl, ARGV[4] the wake horizon (a Unix time: ``shared.bus.deadlines``);
-- then, for each append, its head and its arguments. The head is one
-- argument of space-separated fields (each argument costs the engine a packing of its
-- own, and Redis a parse): the count of the arguments after it, the expected version,
-- whether the decision requests are every seat's at the append's version ('-' not given,
-- '0' the game goes on, '1' it is over), the event count (negative: the events have no
-- secret, and come as their public json alone), the entry id to acknowledge ('' none)
-- and last the game's id as JSON (a human seat's clock is named by it). Its arguments:
-- 1 command id, 2 game id, 3 result json ('' : the caller publishes it, once replicas have
-- the append), 4 the game's snapshot at the append's version ('' none: stored only with
-- the append, never on a log that took other events), then the events, as (public json,
-- secret json or '') pairs or their public json alone, then decision requests, each as
-- (seat, due, json, the seat's own view json or ''). Each append names only the keys it
-- touches, in turn: 1 log, 2 partition events, 3 meta, 4 seen (read only), 5 command stream,
-- 6 decisions, 7 the game's seats, 8 the partition's deadlines, 9 the bot player's
-- requests; then 10 its result, if it has a result json; then its snapshot, if it has
-- one; then, for a new game (expected version 0), the partition's games and archived
-- games (keys are most of what a call carries: fewer to pack and send).
-- The log keeps the secret beside the public event; the partition stream gets the public
-- event only. A stale version is a conflict and writes nothing. Every decision request
-- goes to the decisions stream (the sockets' readers); a human seat's starts its clock
-- among the deadlines (due then, member [game, version, seat]; one due before the set's
-- earliest, and before the wake horizon, is published on the set's name:
-- ``shared.bus.deadlines.Wakes``; the bot player reads the sets again before a later
-- one is due, so the set's earliest is read only for one before the horizon); a bot's or a
-- leaver's also goes to the bot player's stream, with the seat's view set into it as its last
-- field ('view') when the engine made one (there only: the sockets' stream and the meta
-- get none); a seat no lobby seated (no entry) to neither.
-- Given as every seat's, the requests are also kept in the game's meta ('pending': their
-- JSON array; 'pending_version', the version they are at; 'over'): the legal commands an
-- HTTP reader asks for, read in one HMGET, read-your-writes as the log is (the views
-- projection's per-seat views are no longer made for them).
-- The command ids appended are kept in the meta too, each a field (a seat-scoped id,
-- ``command_key``, always holds a '/', which none of the meta's own fields does) holding
-- the version after its events: the version, the id's duplicate check and the game's
-- marker read in one HMGET, and all of it written in one HSET (issue 24: they were two
-- hashes, two reads and three writes an append). A game begun before, without the marker
-- 'ids', may have ids in its old 'seen' hash: read there too while it lives, never written.
local group, ttl, horizon = ARGV[2], ARGV[3], tonumber(ARGV[4])
local function append(k, a, last, expected, over, n, entry, game)
  local nkeys = 9
  local result, snapshot, games
  if ARGV[a + 3] ~= '' then nkeys = nkeys + 1; result = KEYS[k + nkeys] end
  if ARGV[a + 4] ~= '' then nkeys = nkeys + 1; snapshot = KEYS[k + nkeys] end
  if expected == 0 then games = k + nkeys + 1; nkeys = nkeys + 2 end
  local meta, id = KEYS[k + 3], ARGV[a + 1]
  local version
  if id == '' then
    version = redis.call('HGET', meta, 'version')
  else
    local head = redis.call('HMGET', meta, 'version', id, 'ids')
    local seen = head[2]
    if not seen and head[1] and not head[3] then  -- a game from before its meta kept ids
      seen = redis.call('HGET', KEYS[k + 4], id)
    end
    if seen then return nkeys, 'duplicate', seen end
    version = head[1]
  end
  version = tonumber(version or '0')
  if version ~= expected then return nkeys, 'conflict', tostring(version) end
  if version == 0 and redis.call('SISMEMBER', KEYS[games + 1], ARGV[a + 2]) == 1 then
    return nkeys, 'archived', '0'
  end
  local step = 2
  if n < 0 then n, step = -n, 1 end
  local publics = {}
  for i = 0, n - 1 do
    version = version + 1
    local public, secret = ARGV[a + 5 + step * i], ''
    if step == 2 then secret = ARGV[a + 6 + 2 * i] end
    if secret == '' then
      redis.call('XADD', KEYS[k + 1], version .. '-0', 'e', public)
    else
      redis.call('XADD', KEYS[k + 1], version .. '-0', 'e', public, 's', secret)
    end
    publics[i + 1] = public
  end
  if n > 0 then
    redis.call('XADD', KEYS[k + 2], '*', 'g', ARGV[a + 2], 'v', version, 'n', n,
               'e', '[' .. table.concat(publics, ',') .. ']')
  end
  local first = a + 5 + step * n  -- the first decision request's arguments
  local fields = {'version', version}
  if id ~= '' then fields[3], fields[4] = id, version end
  if expected == 0 then fields[#fields + 1], fields[#fields + 2] = 'ids', '1' end
  if over ~= '-' then
    local requests = {}
    for i = first + 2, last, 4 do requests[#requests + 1] = ARGV[i] end
    local m = #fields
    fields[m + 1], fields[m + 2] = 'pending_version', version
    fields[m + 3], fields[m + 4] = 'over', over
    fields[m + 5], fields[m + 6] = 'pending', '[' .. table.concat(requests, ',') .. ']'
  end
  redis.call('HSET', meta, unpack(fields))
  if expected == 0 then redis.call('SADD', KEYS[games], ARGV[a + 2]) end
  if snapshot then redis.call('HSET', snapshot, 'v', version, 's', ARGV[a + 4]) end
  if result then answer(result, ARGV[a + 3], ttl) end
  if entry ~= '' then redis.call('XACK', KEYS[k + 5], group, entry) end
  for i = first, last, 4 do
    local who = redis.call('HGET', KEYS[k + 7], ARGV[i])
    if who == 'human' then
      local member = '[' .. game .. ',' .. version .. ',' .. ARGV[i] .. ']'
      local due = tonumber(ARGV[i + 1])
      local wake = due < horizon
      if wake then
        local head = redis.call('ZRANGE', KEYS[k + 8], 0, 0, 'WITHSCORES')
        wake = #head == 0 or due < tonumber(head[2])
      end
      redis.call('ZADD', KEYS[k + 8], ARGV[i + 1], member)
      if wake then
        redis.call('PUBLISH', KEYS[k + 8], '')  -- the earliest: wake the bot players
      end
    elseif who then
      local request = ARGV[i + 2]
      if ARGV[i + 3] ~= '' then  -- the request's JSON object ends with its '}'
        request = string.sub(request, 1, -2) .. ',"view":' .. ARGV[i + 3] .. '}'
      end
      redis.call('XADD', KEYS[k + 9], '*', 'r', request)
    end
    redis.call('XADD', KEYS[k + 6], '*', 'r', ARGV[i + 2])
  end
  return nkeys, 'ok', tostring(version)
end
local out = {}
local a, k = 5, 0
for j = 0, tonumber(ARGV[1]) - 1 do
  local m, expected, over, n, entry, game =
    string.match(ARGV[a], '^(%d+) (%d+) ([01%-]) (%-?%d+) (%S*) (.*)$')
  m = tonumber(m)
  local nkeys
  nkeys, out[2 * j + 1], out[2 * j + 2] =
    append(k, a, a + m, tonumber(expected), over, tonumber(n), entry, game)
  a = a + m + 1
  k = k + nkeys
end
return out
"""
)

_FINISH = (
    _ANSWER
    + """
-- A command that appends nothing (rejected, duplicate): store the result, record a
-- rejection, acknowledge; nothing if the game's log is behind the version the outcome was
-- decided at (a failover took its tail back: 0, the engine reloads the game). An archived
-- game's log is in SQL, not here: not checked.
-- KEYS: 1 result, 2 command stream, 3 rejections, 4 meta, 5 partition archived games
-- ARGV: 1 result json ('' none; not stored over an earlier answer), 2 ttl, 3 group, 4 entry id
--       ('' none), 5 rejection json ('' none), 6 the version decided at ('' none), 7 game id
if ARGV[6] ~= '' and redis.call('SISMEMBER', KEYS[5], ARGV[7]) == 0 then
  if tonumber(redis.call('HGET', KEYS[4], 'version') or '0') < tonumber(ARGV[6]) then return 0 end
end
if ARGV[1] ~= '' then answer(KEYS[1], ARGV[1], ARGV[2]) end
if ARGV[5] ~= '' then redis.call('XADD', KEYS[3], '*', 'r', ARGV[5]) end
if ARGV[4] ~= '' then redis.call('XACK', KEYS[2], ARGV[3], ARGV[4]) end
return 1
"""
)

_ANSWERED = (
    _ANSWER
    + """
-- The answer to an append made and replicated before (see :mod:`.store`), stored once.
-- KEYS: 1 result. ARGV: 1 result json, 2 ttl
answer(KEYS[1], ARGV[1], ARGV[2])
"""
)

_FINISHED = """
-- A game is over: its final hash ('' keeps the one recorded), when it finished (Redis time,
-- ms) and the partition event stream's last entry then, at or after the game's last one.
-- The first time and entry recorded stay. Nothing is recorded if the log has not reached
-- the version of the end (a failover took it back after the engine saw it: the game goes
-- on). Last, the command entries that ended the game or were answered on it over (held by
-- the engine) are acknowledged: an engine stopped before this call, or a call that failed
-- on the way, leaves them pending, to come again and record the end then.
-- KEYS: 1 meta, 2 finished, 3 partition events, 4 command stream (with entries).
-- ARGV: 1 game id, 2 final hash, 3 the version of the end (0: not checked), 4 the engine's
-- group, then the entry ids
if tonumber(redis.call('HGET', KEYS[1], 'version') or '0') < tonumber(ARGV[3]) then
  return 0
end
local now = redis.call('TIME')
local ms = string.format('%d', tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000))
local last = redis.call('XREVRANGE', KEYS[3], '+', '-', 'COUNT', 1)
local entry = '0-0'
if #last > 0 then entry = last[1][1] end
if ARGV[2] ~= '' then redis.call('HSET', KEYS[1], 'final_hash', ARGV[2]) end
redis.call('HSETNX', KEYS[1], 'finished_ms', ms)
redis.call('HSETNX', KEYS[1], 'final_entry', entry)
redis.call('SADD', KEYS[2], ARGV[1])
if #ARGV > 4 then redis.call('XACK', KEYS[4], ARGV[4], unpack(ARGV, 5)) end
return 1
"""

_FORGET = """
-- Delete an archived game's keys, if it is still the game that was archived (same version
-- and final hash); its id moves from the partition's games to its archived games.
-- KEYS: 1 meta, 2 log, 3 seen, 4 snapshot, 5 seats, 6 view, 7 games, 8 finished, 9 archived
-- ARGV: 1 game id, 2 version, 3 final hash
if redis.call('HGET', KEYS[1], 'version') ~= ARGV[2]
   or redis.call('HGET', KEYS[1], 'final_hash') ~= ARGV[3] then
  return 0
end
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6])
redis.call('SREM', KEYS[7], ARGV[1])
redis.call('SREM', KEYS[8], ARGV[1])
redis.call('SADD', KEYS[9], ARGV[1])
return 1
"""


_SNAPSHOT = """
-- Store a snapshot at version ARGV[1] only if the log has reached it. The engine snapshots
-- after an append; if a failover took the append back meanwhile, the snapshot would reach
-- the new master and be loaded in place of its log (a state the log no longer has).
-- KEYS: 1 snapshot, 2 meta. ARGV: 1 version, 2 state json
if tonumber(redis.call('HGET', KEYS[2], 'version') or '0') < tonumber(ARGV[1]) then
  return 0
end
redis.call('HSET', KEYS[1], 'v', ARGV[1], 's', ARGV[2])
return 1
"""


SCRIPTS = Library(
    "eventstore",
    {
        "answer": _ANSWERED,
        "append": _APPEND,
        "finish": _FINISH,
        "finished": _FINISHED,
        "forget": _FORGET,
        "snapshot": _SNAPSHOT,
    },
)

# The engines' leases (``services.engine.leases``): a lease is renewed or released only by
# the engine that holds it (its id in the key), atomically. The lobby releases a keyed
# request's pending Idempotency-Key record so too (``services.lobby.idempotency``).
_RENEW = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
"""
_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""
# Every lease an engine holds renewed in one call on one Redis (a cluster's keys span slots:
# one ``renew`` each there): each one's outcome, 1 renewed or 0 (it names another engine,
# or none). 64 calls every 1.7 s cost an idle engine and its Redis more than the one.
_RENEW_MANY = """
local out = {}
for i, key in ipairs(KEYS) do
  out[i] = 0
  if redis.call('GET', key) == ARGV[1] then out[i] = redis.call('PEXPIRE', key, ARGV[2]) end
end
return out
"""
# Taken when free, or when it already names this engine: an engine that dropped a partition
# because its shard refused the renewal (a failover, NOREPLICAS) wins it back as soon as the
# shard takes writes, not once its key has expired on the new master (issue 25).
_TAKE = """
local holder = redis.call('GET', KEYS[1])
if holder == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
if holder then return 0 end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return 1
"""
LEASES = Library(
    "leases",
    {"renew": _RENEW, "renew_many": _RENEW_MANY, "release": _RELEASE, "take": _TAKE},
)

_VIEW_WRITE = """
-- KEYS: 1 view hash, 2 view updates, 3 the game's log. ARGV: 1 version, 2 game id, 3 the id
-- of the event at that version ('' unknown), then field/value pairs. A view no newer than
-- the stored one is written only if the log went back under the stored one.
local current = tonumber(redis.call('HGET', KEYS[1], 'version') or '0')
if tonumber(ARGV[1]) <= current then
  local held = redis.call('HGET', KEYS[1], 'event') or ''
  if tonumber(ARGV[1]) == current and held ~= '' and held == ARGV[3] then return 0 end -- same
  local entry = redis.call('XRANGE', KEYS[3], current .. '-0', current .. '-0')[1]
  -- the entry's first field is 'e', the public event (the event store's append script)
  if entry and (held == '' or cjson.decode(entry[2][2])['event_id'] == held) then return 0 end
end
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 'version', ARGV[1], 'event', ARGV[3], unpack(ARGV, 4))
redis.call('XADD', KEYS[2], 'MAXLEN', '~', 1000, '*', 'g', ARGV[2], 'v', ARGV[1])
return 1
"""
# The views projector's write: a view and its update notice, never over a newer view.
VIEWS = Library("views", {"write": _VIEW_WRITE})
