import { luaScript } from '@tollway/accounts';
import { EVENT_LOG_LUA } from '../event-log-keys';
import { LUA_DEQUEUE } from './scheduler.lua';

/**
 * Removes a session and every trace of it (hash, history, index entries) at once. In 'delete'
 * mode a running turn is cancelled: a turn still waiting leaves its organization's queue and its
 * job is returned (the caller sends its cancellation callback: it never ran); an executing one is
 * told to its worker (`{ session_id, turn_id }` on the cancel channel), and its job is kept a while
 * for the reaper, should that worker be gone. In 'sweep' mode (the TTL sweeper) the session is
 * kept unless it is idle or errored and its last activity is at or before the cutoff; an index
 * entry without a session is dropped.
 *
 * KEYS[1] session hash, KEYS[2] history list, KEYS[3] activity zset, KEYS[4] org index zset, KEYS[5] errored set
 * ARGV[1] session id, ARGV[2] org ('' = none), ARGV[3] events channel, ARGV[4] cancel channel,
 * ARGV[5] 'delete' | 'sweep', ARGV[6] sweep cutoff (ms, sweep mode only), ARGV[7] key base,
 * ARGV[8] how long the job of an executing turn is kept (ms), and last the event log's argument
 * (deletionLogArg: see EVENT_LOG_LUA), taken off first
 * returns { 'deleted', the job JSON of a waiting turn removed, or false }, { 'missing' } (absent or
 * another org's) or { 'kept' } (sweep mode: not expired)
 */
export const deleteSessionScript = luaScript(
  `${LUA_DEQUEUE}
${EVENT_LOG_LUA}
local log = cjson.decode(table.remove(ARGV))
local s = redis.call('HMGET', KEYS[1], 'status', 'org', 'turn_id', 'job')
if not s[1] then
  if ARGV[5] == 'sweep' then
    redis.call('ZREM', KEYS[3], ARGV[1])
    redis.call('SREM', KEYS[5], ARGV[1])
  end
  return { 'missing' }
end
if s[2] ~= ARGV[2] then return { 'missing' } end
if ARGV[5] == 'sweep' then
  if s[1] == 'running' then return { 'kept' } end
  local last = redis.call('ZSCORE', KEYS[3], ARGV[1])
  if not last or tonumber(last) > tonumber(ARGV[6]) then return { 'kept' } end
end
redis.call('DEL', KEYS[1], KEYS[2])
redis.call('ZREM', KEYS[3], ARGV[1])
redis.call('ZREM', KEYS[4], ARGV[1])
redis.call('SREM', KEYS[5], ARGV[1])
local waitingJob = false
if s[1] == 'running' and s[3] then
  if s[4] and dequeue(ARGV[7], ARGV[2], ARGV[1] .. ':' .. s[3] .. '|' .. s[4]) then
    waitingJob = s[4] or false
  else
    if s[4] then redis.call('SET', ARGV[7] .. 'cancelled:' .. s[3], s[4], 'PX', ARGV[8]) end
    redis.call('PUBLISH', ARGV[4], cjson.encode({ session_id = ARGV[1], turn_id = s[3] }))
  end
end
redis.call('PUBLISH', ARGV[3], cjson.encode({ session_id = ARGV[1], status = 'deleted' }))
local cancelled = ''
if s[1] == 'running' and s[3] then cancelled = s[3] end
logDeletion(ARGV[7], ARGV[1], s[2], cancelled, log)
return { 'deleted', waitingJob }
`,
  'session_delete',
);
