import { luaScript } from '@tollway/accounts';
import { LUA_CLAIM_TURNS } from './scheduler.lua';

/**
 * Dispatches up to ARGV[2] turns in fair order across organizations (see scheduler.lua.ts) and
 * leases each to the calling worker; with ARGV[4] = 1, leaves a wake token when it took all it
 * asked for and organizations stay ready.
 *
 * KEYS[1] ready zset, KEYS[2] leases zset (declared; every key is under ARGV[1]'s hash tag)
 * ARGV[1] key base, ARGV[2] most turns to claim, ARGV[3] lease lifetime (ms), ARGV[4] 1 = baton, 0 = none
 * returns { { session id, turn id, org, job JSON }, … } (the worker reads each history after: a running
 * session's history does not change, and Lua would copy it item by item)
 */
export const claimTurnsScript = luaScript(
  `${LUA_CLAIM_TURNS}
return claimTurns(ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV[4] == '1', nil)
`,
  'turn_claim',
);
