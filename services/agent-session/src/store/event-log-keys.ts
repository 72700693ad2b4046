/**
 * Redis keys of the session event streams (issue 36). They carry the `{sessions}` hash tag of
 * every session key (see `store/session-keys.ts`): the scripts that end a turn or delete a session
 * write the stream in the same atomic step, so on a Redis Cluster they must share its slot.
 */
export interface StreamKeys {
  /** Stream: the session's event log, one entry per event (fields below), trimmed to the retention. */
  events(sessionId: string): string;
  /**
   * String, expiring: the session has readers. API replicas with readers refresh it; a worker
   * writes a turn's events only while it exists (or once it has begun writing them).
   */
  watch(sessionId: string): string;
  /** Channel: a session id, published when its watch key is created, so a worker streams at once. */
  watchChannel: string;
}

/** The keys under `prefix` (e.g. `tollway:`). */
export function streamKeys(prefix: string): StreamKeys {
  const base = `${prefix}{sessions}:`;
  return {
    events: (id) => `${base}ev:${id}`,
    watch: (id) => `${base}watch:${id}`,
    watchChannel: `${prefix}stream-watch`,
  };
}

/**
 * Fields of an event log entry: `y` the event type, `t` the turn id ('' for none), `o` the session's
 * organization ('' without auth), `p` the id of the entry before it ('' for the first one ever
 * written), `s` the id of its turn's first entry ('' on that entry), `e` the event's JSON. `p` lets
 * a reader tell a trimmed gap from contiguous entries; `s` lets a new reader start at its turn's start.
 */
export const ENTRY_FIELDS = { type: 'y', turn: 't', org: 'o', previous: 'p', turnStart: 's', json: 'e' } as const;

/** The stream id before every other: a reader positioned here reads the whole log. */
export const STREAM_START = '0-0';

/**
 * Lua shared by the scripts that append to a log (KEYS and ARGV are each script's own):
 * `last_id(stream)` the id of its last entry or '', and `append(stream, maxlen, y, t, o, p, s, e)`
 * one entry (trimmed approximately to `maxlen`), returning its id.
 */
export const APPEND_LUA = `
local function last_id(stream)
  local last = redis.call('XREVRANGE', stream, '+', '-', 'COUNT', 1)[1]
  if last then return last[1] end
  return ''
end
local function append(stream, maxlen, y, t, o, p, s, e)
  return redis.call('XADD', stream, 'MAXLEN', '~', maxlen, '*', 'y', y, 't', t, 'o', o, 'p', p, 's', s, 'e', e)
end
`;

/**
 * Lua of the scripts that end turns and delete sessions (the scheduler's `finish-turn`, `end-turn`,
 * `reap-turns` and `delete-session`), each given its log arguments (turnEndLogArgs,
 * deletionLogArg) as its last ARGV, which it takes off with `table.remove(ARGV)` before reading the
 * rest, so the event log is written in the step that changes the session and the two never disagree:
 *
 * - `logTurnEnd(base, sid, tid, mode, settings, pendingJson, readers)`, after a turn ended
 *   (applied): when the worker streamed the turn (`mode` = 'write'), or the session has readers or
 *   its log exists, the events the worker had not written (`pendingJson`), then turn.completed or
 *   turn.failed with the session as it reads now and `log.m` (the trace_metrics JSON, 'null' when
 *   unknown), `log` being `settings` decoded. The two JSONs are decoded only then: a turn no one
 *   reads pays no JSON. `readers` is the session's `readers` field as its end read it: '0' = no
 *   reader ever joined it (see SessionKeys.session), so it has neither, and nothing is asked.
 *   Nothing of a turn follows its ending event.
 * - `logDeletion(base, sid, org, tid, log)`, as the session is deleted: when it has readers or a log,
 *   turn.cancelled (of `tid`, or with turn_id null for '') with `log.c` as its error; the log then
 *   lives `log.g` ms (its connected readers read it) and the watch key goes.
 */
export const EVENT_LOG_LUA = `${APPEND_LUA}
local function logTurnEnd(base, sid, tid, mode, settings, pendingJson, readers)
  local stream = base .. 'ev:' .. sid
  if mode ~= 'write' and (readers == '0' or redis.call('EXISTS', stream, base .. 'watch:' .. sid) == 0) then
    return
  end
  local log = cjson.decode(settings)
  local s = redis.call('HMGET', base .. 's:' .. sid, 'status', 'org', 'response', 'error')
  local start = log.s
  local prev = last_id(stream)
  local function add(y, e)
    local id = append(stream, log.n, y, tid, s[2] or '', prev, start, e)
    if start == '' then start = id end
    prev = id
  end
  if pendingJson and pendingJson ~= '[]' then
    for _, pending in ipairs(cjson.decode(pendingJson)) do add(pending[1], pending[2]) end
  end
  local kind = 'turn.failed'
  local err = 'null'
  if s[1] == 'idle' then kind = 'turn.completed' elseif s[4] then err = cjson.encode(s[4]) end
  local session = '{"session_id":' .. cjson.encode(sid) .. ',"status":"' .. s[1] .. '","response":' ..
    (s[3] or 'null') .. ',"error":' .. err .. '}'
  add(kind, '{"type":"' .. kind .. '","session_id":' .. cjson.encode(sid) .. ',"turn_id":' ..
    cjson.encode(tid) .. ',"response":' .. session .. ',"trace_metrics":' .. log.m .. '}')
  redis.call('PEXPIRE', stream, log.r)
end
local function logDeletion(base, sid, org, tid, log)
  local stream = base .. 'ev:' .. sid
  local watch = base .. 'watch:' .. sid
  if redis.call('EXISTS', stream, watch) == 0 then return end
  local turn = 'null'
  if tid ~= '' then turn = cjson.encode(tid) end
  append(stream, log.n, 'turn.cancelled', tid, org, last_id(stream), '',
    '{"type":"turn.cancelled","session_id":' .. cjson.encode(sid) .. ',"turn_id":' .. turn ..
    ',"error":' .. cjson.encode(log.c) .. '}')
  redis.call('PEXPIRE', stream, log.g)
  redis.call('DEL', watch)
end
`;

/** How much of a session's event log is kept. */
export interface EventLogRetention {
  /** Most entries a session's log keeps (trimmed approximately, oldest first). */
  maxEntries: number;
  /** How long a log lives after its last entry, ms. */
  retentionMs: number;
}

/** Defaults of the retention (the config's too): 10 000 entries, 10 minutes. */
export const DEFAULT_EVENT_LOG_RETENTION: EventLogRetention = { maxEntries: 10_000, retentionMs: 600_000 };

/**
 * How long a deleted session's log stays, ms: its connected readers read its last event
 * (`turn.cancelled`) within it; a reader that comes later gets 404, as the session is gone.
 */
export const DELETED_LOG_GRACE_MS = 30_000;

/**
 * What a turn's ending adds to its session's log (the finish script's last argument): the events
 * its worker had not written yet, and the ending event's trace_metrics.
 */
export interface TurnEndEvents {
  /** `write` when the worker streamed this turn already, else `check` (written only if watched or logged). */
  mode: 'write' | 'check';
  /** Id of the turn's first entry in the log ('' when it has none). */
  startId: string;
  /** The ending event's trace_metrics as JSON text; `null` when unknown (a reaper's ending). */
  traceMetricsJson: string;
  /** Events not written yet, oldest first: [type, JSON]. */
  pending: Array<[string, string]>;
}

/**
 * The last three ARGV of the scripts a worker ends a turn with: what `logTurnEnd` writes (see
 * EVENT_LOG_LUA): its mode, its settings, then the events not yet written as JSON of their own (the
 * two JSONs are parsed only when the turn is logged).
 */
export function turnEndLogArgs(retention: EventLogRetention, events?: TurnEndEvents): [string, string, string] {
  return [events?.mode ?? 'check', turnEndLogSettings(retention, events), JSON.stringify(events?.pending ?? [])];
}

/** The log settings of a turn's end (`settings` of logTurnEnd), without its mode and pending events. */
export function turnEndLogSettings(retention: EventLogRetention, events?: TurnEndEvents): string {
  return JSON.stringify({
    n: retention.maxEntries,
    r: retention.retentionMs,
    s: events?.startId ?? '',
    m: events?.traceMetricsJson ?? 'null',
  });
}

/** The last ARGV of the script that deletes a session: what `logDeletion` writes, `cancelled` its error. */
export function deletionLogArg(retention: EventLogRetention, cancelled: string): string {
  return JSON.stringify({
    n: retention.maxEntries,
    g: Math.min(DELETED_LOG_GRACE_MS, retention.retentionMs),
    c: cancelled,
  });
}
