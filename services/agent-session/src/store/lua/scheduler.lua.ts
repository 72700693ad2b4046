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

/**
 * The `activity` score of a running session (its turn waiting or executing): past any time, so the
 * TTL sweep, which takes the oldest activity first, never reaches it.
 */
export const RUNNING_SCORE = 9e15;

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
 * organization its cap held back is ready again. True when it made `org` ready.
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
    return true
  end
  return false
end`;

/**
 * `dequeue(base, org, entry)`: takes a turn that has not started out of its organization's queue
 * (its session is being deleted, or the turn ended otherwise), by its entry, `<session id>:<turn
 * id>|<job JSON>`; true when it was there. An organization left with nothing waiting is no longer
 * ready, and keeps its virtual time.
 */
export const LUA_DEQUEUE = `
local function dequeue(base, org, entry)
  if redis.call('LREM', base .. 'q:' .. org, 1, entry) == 0 then return false end
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
 * `claimOne(base, lease, pending)`: dispatches one turn in fair order and leases it until
 * `lease.untilMs` (set from the Redis clock and `lease.ttlMs` at the first turn a call takes, so a
 * claim that finds nothing reads no clock): { session id, turn id, org, job JSON }; nil when no organization is
 * ready; false for an organization ready with an empty queue (dropped from the ready set). Second
 * result: true when the organization stays ready (so others may still be waiting). `pending.org`
 * names an organization one of whose turns just ended and whose running slot is still to give back
 * (see claimTurns): taken from the same organization, the slot is handed on in the one write of its
 * scheduler hash; otherwise it is given back first, so its organization competes in this claim.
 */
export const LUA_CLAIM_ONE = `${LUA_RELEASE_SLOT}
local function claimOne(base, lease, pending)
  local head = redis.call('ZRANGE', base .. 'ready', 0, 0, 'WITHSCORES')
  if pending.org and head[1] ~= pending.org then
    -- The head changes only if the slot given back made its organization ready.
    if releaseSlot(base, pending.org) then head = redis.call('ZRANGE', base .. 'ready', 0, 0, 'WITHSCORES') end
    pending.org = nil
  end
  local org = head[1]
  if not org then return nil, false end
  local handedOn = pending.org == org
  if handedOn then pending.org = nil end
  local tag = tonumber(head[2])
  local key = base .. 'sched:' .. org
  local o = redis.call('HMGET', key, 'waiting', 'running', 'weight', 'cap')
  local member = redis.call('LPOP', base .. 'q:' .. org)
  local waiting = 0
  local running = tonumber(o[2] or '0')
  if handedOn then running = math.max(0, running - 1) end
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
  -- An entry is '<session id>:<turn id>|<job JSON>': the claim needs no read of the session. A
  -- waiting turn leaves the queue with its session (deletion), so every entry is a live turn.
  local bar = string.find(member, '|', 1, true)
  local sep = string.find(member, ':', 1, true)
  local sid = string.sub(member, 1, sep - 1)
  local tid = string.sub(member, sep + 1, bar - 1)
  if not lease.untilMs then lease.untilMs = redisNow() + lease.ttlMs end
  redis.call('ZADD', base .. 'leases', lease.untilMs, sid .. ':' .. tid .. ':' .. org)
  -- Whether the session has readers is asked by the worker with the turn's history, in the same
  -- round trip (a command there costs Redis less than one from a script).
  return { sid, tid, org, string.sub(member, bar + 1) }, stays
end`;

/**
 * `claimTurns(base, max, leaseTtlMs, baton, releasing)`: up to `max` turns (see claimOne). With
 * `baton`, a claim that took all it asked for while organizations stay ready leaves a wake token,
 * so an idle worker takes the rest (a worker replacing a turn it just ended needs none: the count
 * of turns executing does not grow). `releasing` names the organization of a turn that just ended,
 * whose running slot this call gives back (handed on to its next turn when that is claimed).
 */
export const LUA_CLAIM_TURNS = `${LUA_REDIS_NOW}
${LUA_CLAIM_ONE}
local function claimTurns(base, max, leaseTtlMs, baton, releasing)
  local out = {}
  local pending = { org = releasing }
  local stays = false
  if max > 0 then
    local lease = { ttlMs = leaseTtlMs }
    -- Entries dropped do not count; the bound keeps one call short whatever the queues hold.
    for _ = 1, max + 32 do
      local turn
      turn, stays = claimOne(base, lease, pending)
      if turn == nil then break end
      if turn then out[#out + 1] = turn end
      if #out >= max then break end
    end
  end
  if pending.org then releaseSlot(base, pending.org) end
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
 * of the last successful turn. The turn's id and job are blanked (the job holds the webhook's
 * token, which must not outlive the turn), and the session's activity is now. Publishes the
 * session event that wakes long-polls, with the outcome: on the channel of each API replica whose
 * long-polls registered on the session (`waiters`, cleared here), or, when none ever did (a
 * session no long-poll of this build read), on the shared channel.
 * A turn another than its worker ends leaves an expiring marker (`ended:<tid>`). Returns 'applied'
 * or 'stale' (nothing written); with 'applied', the session's `readers` field (for logTurnEnd).
 */
export const LUA_END_TURN = `
local function endTurn(base, sid, tid, now, channel, ender, kind, text, markerTtlMs, messages, first)
  local skey = base .. 's:' .. sid
  local s = redis.call('HMGET', skey, 'status', 'turn_id', 'history_bytes', 'waiters', 'readers')
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
      'ended_turn', tid .. ' ' .. ender, 'turn_id', '', 'job', '', 'waiters', '')
  else
    redis.call('HSET', skey, 'status', 'error', 'error', text, 'updated_at', now, 'ended_turn', tid .. ' ' .. ender,
      'turn_id', '', 'job', '', 'waiters', '')
    redis.call('SADD', base .. 'errored', sid)
  end
  if ender ~= 'worker' then redis.call('SET', base .. 'ended:' .. tid, ender, 'PX', markerTtlMs) end
  redis.call('ZADD', base .. 'activity', now, sid)
  local event = { session_id = sid, turn_id = tid, status = status }
  if status == 'idle' then
    event.response = text
  else
    event.error = text
    local kept = redis.call('HGET', skey, 'response')
    if kept then event.response = kept end
  end
  local message = cjson.encode(event)
  if not s[4] then
    redis.call('PUBLISH', channel, message)
  else
    for replica in string.gmatch(s[4], '%S+') do redis.call('PUBLISH', channel .. ':' .. replica, message) end
  end
  return 'applied', s[5]
end`;
