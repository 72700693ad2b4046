import { luaScript } from '@tollway/accounts';
import { APPEND_LUA } from '../event-log-keys';

/**
 * Ends a turn compare-and-set: only while the session is running this very turn. Success
 * appends the turn's messages (adding their bytes to `history_bytes`) and goes idle with `response`; error goes to error with the
 * message and appends nothing, keeping the `response` of the last successful turn. Publishes the
 * session event that wakes long-polls, carrying the outcome (`response` JSON, and `error` on an
 * error) so a woken long-poll answers without reading the session.
 *
 * KEYS[1] session hash, KEYS[2] history list, KEYS[3] activity zset, KEYS[4] running zset, KEYS[5] errored set,
 * KEYS[6] the turn's ended marker (set, expiring, when another than its worker ends it: the session
 * may be deleted before the worker that fetched the job comes back, and the marker outlives it)
 * ARGV[1] session id, ARGV[2] turn id, ARGV[3] now (ms), ARGV[4] events channel,
 * ARGV[5] who ends it ('worker', 'reaper', 'api'; kept with the turn id in `ended_turn`, so a
 * worker that lost the reply can tell its own ending from another's),
 * ARGV[6] 'success' | 'error', ARGV[7] response JSON (success) or error message (error),
 * ARGV[8] how long the ended marker lives (ms),
 * ARGV[9..#ARGV-1] messages to append (success), one JSON message each
 * KEYS[7], KEYS[8] and ARGV[#ARGV]: the session's event stream, see the block at the end
 * returns 'applied', or 'stale' when the session is gone or runs another turn (nothing written)
 */
export const finishTurnScript = luaScript(
  `${APPEND_LUA}
local s = redis.call('HMGET', KEYS[1], 'status', 'turn_id')
if s[1] ~= 'running' or s[2] ~= ARGV[2] then return 'stale' end
local status = 'error'
if ARGV[6] == 'success' then
  status = 'idle'
  local bytes = 0
  local last = #ARGV - 1
  for i = 9, last do bytes = bytes + #ARGV[i] end
  for i = 9, last, 1000 do
    redis.call('RPUSH', KEYS[2], unpack(ARGV, i, math.min(i + 999, last)))
  end
  redis.call('HINCRBY', KEYS[1], 'history_bytes', bytes)
  redis.call('HSET', KEYS[1], 'status', 'idle', 'response', ARGV[7], 'updated_at', ARGV[3])
else
  redis.call('HSET', KEYS[1], 'status', 'error', 'error', ARGV[7], 'updated_at', ARGV[3])
  redis.call('SADD', KEYS[5], ARGV[1])
end
redis.call('HDEL', KEYS[1], 'turn_id', 'started_at')
redis.call('HSET', KEYS[1], 'ended_turn', ARGV[2] .. ' ' .. ARGV[5])
if ARGV[5] ~= 'worker' then redis.call('SET', KEYS[6], ARGV[5], 'PX', ARGV[8]) end
redis.call('ZREM', KEYS[4], ARGV[1])
redis.call('ZADD', KEYS[3], ARGV[3], ARGV[1])
local event = { session_id = ARGV[1], turn_id = ARGV[2], status = status }
if status == 'idle' then
  event.response = ARGV[7]
else
  event.error = ARGV[7]
  local kept = redis.call('HGET', KEYS[1], 'response')
  if kept then event.response = kept end
end
-- Event stream (issue 36; src/streaming/). KEYS[7] the session's event log, KEYS[8] its watch key;
-- ARGV[#ARGV] JSON { n: most entries kept, r: log lifetime after its last entry (ms), w: 'write'
-- when the worker has streamed this turn else 'check', s: id of the turn's first entry or '',
-- m: the turn's trace_metrics as JSON text ('null' when unknown), e: [[type, JSON], ...] events
-- the worker had not written yet }. When the turn was streamed, the session has readers or its log
-- exists, the pending events then the turn's ending event (turn.completed or turn.failed, with the
-- session as it reads now) are appended here, in the step that ends the turn: the log and the
-- session's state never disagree, and nothing of the turn can follow its ending event.
local stream = cjson.decode(ARGV[#ARGV])
if stream.w == 'write' or redis.call('EXISTS', KEYS[7], KEYS[8]) > 0 then
  local org = redis.call('HGET', KEYS[1], 'org') or ''
  local start = stream.s
  local prev = last_id(KEYS[7])
  local function add(y, e)
    local id = append(KEYS[7], stream.n, y, ARGV[2], org, prev, start, e)
    if start == '' then start = id end
    prev = id
  end
  for _, pending in ipairs(stream.e) do add(pending[1], pending[2]) end
  local kind = 'turn.failed'
  if status == 'idle' then kind = 'turn.completed' end
  local err = 'null'
  if event.error then err = cjson.encode(event.error) end
  local session = '{"session_id":' .. cjson.encode(ARGV[1]) .. ',"status":"' .. status .. '","response":' ..
    (event.response or 'null') .. ',"error":' .. err .. '}'
  add(kind, '{"type":"' .. kind .. '","session_id":' .. cjson.encode(ARGV[1]) .. ',"turn_id":' ..
    cjson.encode(ARGV[2]) .. ',"response":' .. session .. ',"trace_metrics":' .. stream.m .. '}')
  redis.call('PEXPIRE', KEYS[7], stream.r)
end
redis.call('PUBLISH', ARGV[4], cjson.encode(event))
return 'applied'
`,
  'turn_finish',
);
