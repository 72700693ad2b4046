import { IDEMPOTENCY_RECORD_LUA } from './idempotency-record.lua';

/**
 * Creates an organization unless one with that id exists, or existed: the id of a deleted
 * organization is retired (its tombstone, written by DELETE_ORG_LUA), so a new organization never
 * inherits what the old one left under it (sessions, usage, queued turns billed to the id). With
 * an idempotency record (KEYS[3], as update-org.lua.ts keeps them) a create is made once: the
 * record, kept ARGV[9] seconds, holds the fingerprint of the create that made it, and is written
 * with the organization.
 *
 * KEYS[1]  the organization hash ({org:<id>}:org)
 * KEYS[2]  its tombstone ({org:<id>}:deleted)
 * KEYS[3]  optional: the idempotency record ({org:<id>}:idempotency:<SHA-256 of the key>)
 * ARGV[1]  name
 * ARGV[2]  created (unix seconds)
 * ARGV[3]  budget_requests    ARGV[4] budget_input_tokens    ARGV[5] budget_output_tokens
 * ARGV[6]  credit (USD)
 * ARGV[7]  '1' to reuse a retired id (the quickstart's own `dev` organization), else ''
 * ARGV[8]  with KEYS[3]: the create's fingerprint; ARGV[9] how long the record is kept, seconds
 *          (without KEYS[3]: '' and 0)
 * ARGV[10…] the session limits, in pairs: field name (`limit_sessions`…), value (decimal digits,
 *          or '' to leave the field out: the session service's default)
 * Returns  1 when created, 0 when the organization already exists (left untouched), 2 when the
 *          record holds this create (made before: nothing changed now), 3 when it holds another
 *          request, 4 when the id is retired.
 */
export const CREATE_ORG_LUA = `${IDEMPOTENCY_RECORD_LUA}
local before = made_before(KEYS[3], ARGV[8])
if before then return before end
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
if redis.call('EXISTS', KEYS[2]) == 1 then
  if ARGV[7] ~= '1' then return 4 end
  redis.call('DEL', KEYS[2])
end
redis.call('HSET', KEYS[1], 'name', ARGV[1], 'created', ARGV[2], 'budget_requests', ARGV[3],
  'budget_input_tokens', ARGV[4], 'budget_output_tokens', ARGV[5], 'credit', ARGV[6])
for i = 10, #ARGV, 2 do
  if ARGV[i + 1] ~= '' then redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1]) end
end
if KEYS[3] then redis.call('SET', KEYS[3], ARGV[8], 'EX', ARGV[9]) end
return 1
`;
