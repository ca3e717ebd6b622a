"""The Lua scripts of `RedisSessionStore`: one per operation, each atomic and one round
trip (registered once, run by EVALSHA). Times always come in as arguments from the
injected clock, never from the server's clock. Key names come from `reference.keys`
(single-session scripts get them as KEYS, multi-session ones as templates).
"""

from __future__ import annotations

LIB = """
local function load(key)
  local flat = redis.call('HGETALL', key)
  if #flat == 0 then return nil end
  local t = {}
  for i = 1, #flat, 2 do t[flat[i]] = flat[i + 1] end
  return t
end

local function purge(sid, member, hkey, ckey, ukey, zkey)
  redis.call('DEL', hkey, ckey)
  redis.call('SREM', ukey, sid)
  redis.call('ZREM', zkey, member)
end

-- The session unless missing or expired; an expired one is purged.
local function live(sid, member, hkey, ckey, ukey, zkey, now)
  local t = load(hkey)
  if not t then return nil end
  if now >= tonumber(t.expires_at) then
    purge(sid, member, hkey, ckey, ukey, zkey)
    return nil
  end
  return t
end

local function native(key, ttl_ms)
  if ttl_ms ~= '' then redis.call('PEXPIRE', key, ttl_ms) end
end

local function refresh(member, hkey, ckey, zkey, now_s, until_s, at_ms)
  redis.call('HSET', hkey, 'last_active_at', now_s, 'expires_at', until_s)
  redis.call('ZADD', zkey, until_s, member)
  native(hkey, at_ms)
  native(ckey, at_ms)
end
"""

# Single-session scripts share one calling convention. Every key is the caller's user's
# (`reference.keys`), so another user's session of the same id is never touched or seen.
#   KEYS = hash, context list, the user's session set, expiry zset
#   ARGV = session_id, expiry-index member, user_id, now, then per-script arguments
SINGLE = (
    LIB
    + """
local hkey, ckey, ukey, zkey = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local sid, member, uid, now_s = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local now = tonumber(now_s)
"""
)

CREATE = (
    SINGLE
    + """
-- ARGV[5..8] = channel, expires_at, task_state, native PEXPIRE ms or ''
if live(sid, member, hkey, ckey, ukey, zkey, now) then return 0 end
redis.call('DEL', ckey)
redis.call('HSET', hkey, 'user_id', uid, 'channel', ARGV[5], 'started_at', now_s,
  'last_active_at', now_s, 'expires_at', ARGV[6], 'status', 'active', 'task_state', ARGV[7])
redis.call('SADD', ukey, sid)
redis.call('ZADD', zkey, ARGV[6], member)
native(hkey, ARGV[8])
return 1
"""
)

GET = (
    SINGLE
    + """
-- ARGV[5] = refresh-until or '' (peek); ARGV[6] = native PEXPIRE ms or ''
local t = live(sid, member, hkey, ckey, ukey, zkey, now)
if not t then return nil end
if ARGV[5] ~= '' and t.status == 'active' then
  refresh(member, hkey, ckey, zkey, now_s, ARGV[5], ARGV[6])
end
return redis.call('HGETALL', hkey)
"""
)

APPEND = (
    SINGLE
    + """
-- ARGV[5..8] = message id, window, refresh-until, native PEXPIRE ms or ''
local t = live(sid, member, hkey, ckey, ukey, zkey, now)
if not t then return {0} end
if t.status ~= 'active' then return {-1} end
redis.call('LPUSH', ckey, ARGV[5])
redis.call('LTRIM', ckey, 0, tonumber(ARGV[6]) - 1)
refresh(member, hkey, ckey, zkey, now_s, ARGV[7], ARGV[8])
return {1, redis.call('LRANGE', ckey, 0, -1)}
"""
)

CONTEXT = (
    SINGLE
    + """
local t = live(sid, member, hkey, ckey, ukey, zkey, now)
if not t then return {0} end
return {1, redis.call('LRANGE', ckey, 0, -1)}
"""
)

SET_TASK_STATE = (
    SINGLE
    + """
-- ARGV[5..7] = task_state, refresh-until, native PEXPIRE ms or ''
local t = live(sid, member, hkey, ckey, ukey, zkey, now)
if not t then return {0} end
if t.status ~= 'active' then return {-1} end
redis.call('HSET', hkey, 'task_state', ARGV[5])
refresh(member, hkey, ckey, zkey, now_s, ARGV[6], ARGV[7])
return {1, redis.call('HGETALL', hkey)}
"""
)

CLOSE = (
    SINGLE
    + """
local t = live(sid, member, hkey, ckey, ukey, zkey, now)
if not t then return 0 end
redis.call('HSET', hkey, 'status', 'closed')
return 1
"""
)

RESET = (
    SINGLE
    + """
local t = live(sid, member, hkey, ckey, ukey, zkey, now)
if not t then return 0 end
redis.call('DEL', ckey)
redis.call('HSET', hkey, 'task_state', '{}')
return 1
"""
)

DELETE = (
    SINGLE
    + """
local t = live(sid, member, hkey, ckey, ukey, zkey, now)
if not t then return 0 end
purge(sid, member, hkey, ckey, ukey, zkey)
return 1
"""
)

# Multi-session scripts build keys from templates (Namespace methods applied to '%s'), so
# key names still have one source, `reference.keys`.
#   KEYS = the user's session set (or nothing), expiry zset
#   ARGV = now, hash template, context template, user-set template, then per-script
MULTI = (
    LIB
    + """
local now_s, stpl, ctpl, utpl = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local now = tonumber(now_s)
local function keys_of(uid, sid)
  return string.format(stpl, uid, sid), string.format(ctpl, uid, sid), uid .. ':' .. sid
end
"""
)

LIST_USER = (
    MULTI
    + """
-- ARGV[5] = user_id; returns {session_id, HGETALL...} per live session
local ukey, zkey, uid = KEYS[1], KEYS[2], ARGV[5]
local out = {}
for _, sid in ipairs(redis.call('SMEMBERS', ukey)) do
  local hkey, ckey, member = keys_of(uid, sid)
  local t = live(sid, member, hkey, ckey, ukey, zkey, now)
  if not t then
    redis.call('SREM', ukey, sid)  -- the hash went (native TTL) without its index entry
  else
    table.insert(out, {sid, redis.call('HGETALL', hkey)})
  end
end
return out
"""
)

DELETE_USER = (
    MULTI
    + """
-- ARGV[5] = user_id; returns how many live sessions were removed
local ukey, zkey, uid = KEYS[1], KEYS[2], ARGV[5]
local n = 0
for _, sid in ipairs(redis.call('SMEMBERS', ukey)) do
  local hkey, ckey, member = keys_of(uid, sid)
  local t = load(hkey)
  if t and now < tonumber(t.expires_at) then n = n + 1 end
  purge(sid, member, hkey, ckey, ukey, zkey)
end
redis.call('DEL', ukey)
return n
"""
)

SWEEP = (
    MULTI
    + """
-- ARGV[5] = batch size; returns how many expired sessions were removed
local zkey = KEYS[1]
local n = 0
local due = redis.call('ZRANGEBYSCORE', zkey, '-inf', now_s, 'LIMIT', 0, tonumber(ARGV[5]))
for _, member in ipairs(due) do
  local uid, sid = string.match(member, '^([^:]*):(.*)$')
  local hkey, ckey = keys_of(uid, sid)
  local t = load(hkey)
  if t and now < tonumber(t.expires_at) then
    redis.call('ZADD', zkey, t.expires_at, member)  -- index was behind the hash: repair it
  else
    purge(sid, member, hkey, ckey, string.format(utpl, uid), zkey)
    n = n + 1
  end
end
return n
"""
)
