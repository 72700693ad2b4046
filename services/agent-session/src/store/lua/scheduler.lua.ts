/**
 * Lua functions of the fair turn scheduler, shared by the scripts that queue, claim, end and delete
 * turns (each script includes the ones it calls). `base` is the key base of the session service
 * (`<prefix>{sessions}:`): an organization's scheduler hash and queue are named from it inside the
 * script, since which organization a claim serves is only known there. Every key shares the
 * `{sessions}` hash tag, so each script stays on one Redis Cluster slot.
 *
 * The scheme is start-time fair queuing: each organization with turns to dispatch sits in the
 * `ready` sorted set, scored by the virtual start of its oldest waiting turn; a claim takes the
 * smallest, and the organization's next turn starts 1/weight later. An organization becoming ready
 * starts no earlier than the virtual time now (the smallest score ready, else the last dispatch's),
 * so being idle for a while earns no credit over others. An organization at its cap on running
 * turns leaves `ready` until one of them ends. Each step is O(log n) in the organizations ready.
 */

/** `redisNow()`: milliseconds on the Redis server's clock, which every worker and reaper shares. */
export const LUA_REDIS_NOW = `
local function redisNow()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end`;

/** Virtual times are kept as text exactly (a Lua number printed with 17 significant digits). */
const LUA_TAG = `
local function tagText(value) return string.format('%.17g', value) end`;

/**
 * `activate(base, org, vt)`: makes `org` ready, its next turn starting at the later of its own
 * virtual time `vt` and the virtual time now, and leaves a wake token for one idle worker.
 */
export const LUA_ACTIVATE = `${LUA_TAG}
local function activate(base, org, vt)
  local head = redis.call('ZRANGE', base .. 'ready', 0, 0, 'WITHSCORES')
  local now = head[2] and tonumber(head[2]) or tonumber(redis.call('GET', base .. 'vclock') or '0')
  redis.call('ZADD', base .. 'ready', tagText(math.max(vt, now)), org)
  redis.call('ZADD', base .. 'wake', 0, 'w')
end`;

/**
 * `releaseSlot(base, org)`: one executing turn of `org` ended (its lease was removed); an
 * organization its cap held back is ready again.
 */
export const LUA_RELEASE_SLOT = `${LUA_ACTIVATE}
local function releaseSlot(base, org)
  local key = base .. 'sched:' .. org
  local o = redis.call('HMGET', key, 'waiting', 'running', 'cap', 'vt')
  local running = tonumber(o[2] or '0')
  local cap = tonumber(o[3] or '0')
  redis.call('HSET', key, 'running', math.max(0, running - 1))
  if tonumber(o[1] or '0') > 0 and cap > 0 and running >= cap and running - 1 < cap then
    activate(base, org, tonumber(o[4] or '0'))
  end
end`;

/**
 * `dequeue(base, org, member)`: takes a turn that has not started out of its organization's queue
 * (its session is being deleted, or the turn ended otherwise); true when it was there. An
 * organization left with nothing waiting is no longer ready, and keeps its virtual time.
 */
export const LUA_DEQUEUE = `
local function dequeue(base, org, member)
  if redis.call('LREM', base .. 'q:' .. org, 1, member) == 0 then return false end
  local key = base .. 'sched:' .. org
  local waiting = math.max(0, tonumber(redis.call('HGET', key, 'waiting') or '1') - 1)
  redis.call('HSET', key, 'waiting', waiting)
  if waiting == 0 then
    local tag = redis.call('ZSCORE', base .. 'ready', org)
    if tag then
      redis.call('ZREM', base .. 'ready', org)
      redis.call('HSET', key, 'vt', tag)
    end
  end
  return true
end`;

/**
 * `claimOne(base, leaseUntil)`: dispatches one turn in fair order and leases it until
 * `leaseUntil`: { session id, turn id, org, job JSON, { history… } }; nil when no organization is
 * ready; false for a queue entry without its turn (dropped; nothing claimed). Second result: true
 * when the organization stays ready (so others may still be waiting).
 */
export const LUA_CLAIM_ONE = `${LUA_RELEASE_SLOT}
local function claimOne(base, leaseUntil)
  local head = redis.call('ZRANGE', base .. 'ready', 0, 0, 'WITHSCORES')
  local org = head[1]
  if not org then return nil, false end
  local tag = tonumber(head[2])
  local key = base .. 'sched:' .. org
  local o = redis.call('HMGET', key, 'waiting', 'running', 'weight', 'cap')
  local member = redis.call('LPOP', base .. 'q:' .. org)
  local waiting = 0
  local running = tonumber(o[2] or '0')
  if member then
    waiting = math.max(0, tonumber(o[1] or '0') - 1)
    running = running + 1
  end
  local cap = tonumber(o[4] or '0')
  local nextTag = tag + 1 / math.max(1, tonumber(o[3] or '1'))
  local stays = waiting > 0 and (cap == 0 or running < cap)
  if stays then
    redis.call('ZADD', base .. 'ready', tagText(nextTag), org)
    redis.call('HSET', key, 'waiting', waiting, 'running', running)
  else
    redis.call('ZREM', base .. 'ready', org)
    redis.call('HSET', key, 'waiting', waiting, 'running', running, 'vt', tagText(nextTag))
    redis.call('SET', base .. 'vclock', tagText(tag))
  end
  if not member then return false, stays end
  local sep = string.find(member, ':', 1, true)
  local sid = string.sub(member, 1, sep - 1)
  local tid = string.sub(member, sep + 1)
  local s = redis.call('HMGET', base .. 's:' .. sid, 'status', 'turn_id', 'job')
  if s[1] ~= 'running' or s[2] ~= tid or not s[3] then
    -- A queued turn leaves the queue with its session, so this entry outlived its turn somehow
    -- (a key deleted by hand): dropped, its slot given back.
    releaseSlot(base, org)
    return false, stays
  end
  redis.call('ZADD', base .. 'leases', leaseUntil, member .. ':' .. org)
  return { sid, tid, org, s[3], redis.call('LRANGE', base .. 'h:' .. sid, 0, -1) }, stays
end`;

/**
 * `claimTurns(base, max, leaseTtlMs, baton)`: up to `max` turns (see claimOne). With `baton`,
 * a claim that took all it could while organizations stay ready leaves a wake token, so an idle
 * worker takes the rest (a worker replacing a turn it just ended needs none: the count of turns
 * executing does not grow).
 */
export const LUA_CLAIM_TURNS = `${LUA_REDIS_NOW}
${LUA_CLAIM_ONE}
local function claimTurns(base, max, leaseTtlMs, baton)
  local out = {}
  if max <= 0 then return out end
  local leaseUntil = redisNow() + leaseTtlMs
  local stays = false
  -- Entries dropped do not count; the bound keeps one call short whatever the queues hold.
  for _ = 1, max + 32 do
    local turn
    turn, stays = claimOne(base, leaseUntil)
    if turn == nil then break end
    if turn then out[#out + 1] = turn end
    if #out >= max then break end
  end
  if baton and #out >= max and (stays or redis.call('EXISTS', base .. 'ready') == 1) then
    redis.call('ZADD', base .. 'wake', 0, 'w')
  end
  return out
end`;

/**
 * `endTurn(base, sid, tid, now, channel, ender, kind, text, markerTtlMs, messages, first)`:
 * ends the turn compare-and-set (only while the session runs this very turn). Success appends
 * `messages[first..]` (adding their bytes to history_bytes) and goes idle with `response` =
 * `text`; error goes to error with the message `text` and appends nothing, keeping the response
 * of the last successful turn. Publishes the session event that wakes long-polls, with the outcome.
 * A turn another than its worker ends leaves an expiring marker (`ended:<tid>`). Returns 'applied'
 * or 'stale' (nothing written).
 */
export const LUA_END_TURN = `
local function endTurn(base, sid, tid, now, channel, ender, kind, text, markerTtlMs, messages, first)
  local skey = base .. 's:' .. sid
  local s = redis.call('HMGET', skey, 'status', 'turn_id', 'history_bytes')
  if s[1] ~= 'running' or s[2] ~= tid then return 'stale' end
  local status = 'error'
  if kind == 'success' then
    status = 'idle'
    local bytes = tonumber(s[3] or '0')
    for i = first, #messages do bytes = bytes + #messages[i] end
    for i = first, #messages, 1000 do
      redis.call('RPUSH', base .. 'h:' .. sid, unpack(messages, i, math.min(i + 999, #messages)))
    end
    redis.call('HSET', skey, 'status', 'idle', 'response', text, 'updated_at', now, 'history_bytes', bytes,
      'ended_turn', tid .. ' ' .. ender)
  else
    redis.call('HSET', skey, 'status', 'error', 'error', text, 'updated_at', now, 'ended_turn', tid .. ' ' .. ender)
    redis.call('SADD', base .. 'errored', sid)
  end
  redis.call('HDEL', skey, 'turn_id', 'started_at', 'job')
  if ender ~= 'worker' then redis.call('SET', base .. 'ended:' .. tid, ender, 'PX', markerTtlMs) end
  redis.call('ZREM', base .. 'running', sid)
  redis.call('ZADD', base .. 'activity', now, sid)
  local event = { session_id = sid, turn_id = tid, status = status }
  if status == 'idle' then
    event.response = text
  else
    event.error = text
    local kept = redis.call('HGET', skey, 'response')
    if kept then event.response = kept end
  end
  redis.call('PUBLISH', channel, cjson.encode(event))
  return 'applied'
end`;
