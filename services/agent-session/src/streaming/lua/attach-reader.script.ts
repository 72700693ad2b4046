import { luaScript } from '@tollway/accounts';

/**
 * A reader joins a session's stream: checks the session is the caller's, marks it watched (the
 * watch key, refreshed while readers remain; its creation is published so the worker running the
 * session's turn streams at once; and the session's `readers` field, so the ends of its turns look
 * for readers and a log from now on) and finds where a new reader starts, in one atomic step, so a
 * turn that starts or ends meanwhile is either wholly before or wholly after it. A new reader
 * starts at the running turn's first entry when the log holds one (a reader joining mid-turn reads
 * the turn from its start), else at the log's end (the worker writes the turn from its start,
 * deltas so far in one, as soon as it learns of the reader).
 *
 * KEYS[1] session hash, KEYS[2] event log stream, KEYS[3] watch key
 * ARGV[1] caller's org ('' = none), ARGV[2] watch key lifetime (ms), ARGV[3] watch channel, ARGV[4] session id
 * returns { 'missing' } (absent or another org's), or { 'ok', start (the id a new reader reads
 * after), tail (the log's last id, '0-0' when empty) }
 */
export const attachReaderScript = luaScript(
  `
local s = redis.call('HMGET', KEYS[1], 'status', 'org', 'turn_id', 'readers')
if not s[1] or s[2] ~= ARGV[1] then return { 'missing' } end
-- From now on the ends of the session's turns look for its readers and its log (see logTurnEnd).
if s[4] == '0' then redis.call('HSET', KEYS[1], 'readers', '1') end
if not redis.call('SET', KEYS[3], '1', 'PX', ARGV[2], 'GET') then
  redis.call('PUBLISH', ARGV[3], ARGV[4])
end
local function field(entry, name)
  for i = 1, #entry[2], 2 do
    if entry[2][i] == name then return entry[2][i + 1] end
  end
  return ''
end
local function before(entry)
  local p = field(entry, 'p')
  if p == '' then return '0-0' end
  return p
end
local last = redis.call('XREVRANGE', KEYS[2], '+', '-', 'COUNT', 1)[1]
if not last then return { 'ok', '0-0', '0-0' } end
local start = last[1]
if s[1] == 'running' and field(last, 't') == s[3] then
  local first = field(last, 's')
  if first == '' then
    start = before(last)
  else
    local entry = redis.call('XRANGE', KEYS[2], first, first)[1]
    if entry then start = before(entry) else start = '0-0' end
  end
end
return { 'ok', start, last[1] }
`,
  'events_attach',
);
