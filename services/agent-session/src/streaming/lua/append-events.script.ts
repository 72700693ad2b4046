import { luaScript } from '@tollway/accounts';
import { APPEND_LUA } from '../../store/event-log-keys';

/**
 * Appends a batch of a running turn's events to its session's log, as its worker flushes them.
 * Nothing is written for a turn that is no longer the session's current one (ended, deleted), so
 * no event of a turn ever follows its ending event. In `check` mode nothing is written either
 * unless the session has readers (its watch key exists): how a worker learns, in the same round
 * trip, whether to stream at all; once it has written, it goes on in `write` mode to the turn's end.
 *
 * KEYS[1] session hash, KEYS[2] event log stream, KEYS[3] watch key
 * ARGV[1] turn id, ARGV[2] the session's organization ('' = none), ARGV[3] most entries kept
 * (approximate), ARGV[4] how long the log lives after its last entry (ms), ARGV[5] 'check' | 'write',
 * ARGV[6] id of the turn's first entry ('' until it has one), ARGV[7..] pairs of event type and JSON
 * returns { 1, first entry id of the turn } when written, { 0, '' } when not watched (check mode;
 * then the turn is not looked at), { -1, '' } when the turn is no longer current
 */
export const appendEventsScript = luaScript(
  `${APPEND_LUA}
-- The check first: a turn no one reads costs one command here.
if ARGV[5] ~= 'write' and redis.call('EXISTS', KEYS[3]) == 0 then return { 0, '' } end
local s = redis.call('HMGET', KEYS[1], 'status', 'turn_id')
if s[1] ~= 'running' or s[2] ~= ARGV[1] then return { -1, '' } end
local start = ARGV[6]
local prev = last_id(KEYS[2])
for i = 7, #ARGV, 2 do
  local id = append(KEYS[2], ARGV[3], ARGV[i], ARGV[1], ARGV[2], prev, start, ARGV[i + 1])
  if start == '' then start = id end
  prev = id
end
redis.call('PEXPIRE', KEYS[2], ARGV[4])
return { 1, start }
`,
  'events_append',
);
