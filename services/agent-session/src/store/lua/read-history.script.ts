import { luaScript } from '@tollway/accounts';
import { LUA_HISTORY } from './scheduler.lua';

/**
 * Reads a session's owner and its history as stored (see LUA_HISTORY), in one step; a history an
 * earlier build stored as a list is upgraded first.
 *
 * KEYS[1] session hash (declared; the history is named from ARGV[1], under the same hash tag)
 * ARGV[1] key base, ARGV[2] session id
 * returns { org ('' = none) or false when the session is absent, the history ('' for none) }
 */
export const readHistoryScript = luaScript(
  `${LUA_HISTORY}
local org = redis.call('HGET', KEYS[1], 'org')
if not org then return { false, '' } end
return { org, readHistory(ARGV[1], ARGV[2]) }
`,
  'history_read',
);
