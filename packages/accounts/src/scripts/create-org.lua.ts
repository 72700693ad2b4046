import { IDEMPOTENCY_RECORD_LUA } from './idempotency-record.lua';

/**
 * Creates an organization unless one with that id exists. With an idempotency record (KEYS[2],
 * as update-org.lua.ts keeps them) a create is made once: the record, kept ARGV[8] seconds, holds
 * the fingerprint of the create that made it, and is written with the organization.
 *
 * KEYS[1]  the organization hash ({org:<id>}:org)
 * KEYS[2]  optional: the idempotency record ({org:<id>}:idempotency:<SHA-256 of the key>)
 * ARGV[1]  name
 * ARGV[2]  created (unix seconds)
 * ARGV[3]  budget_requests    ARGV[4] budget_input_tokens    ARGV[5] budget_output_tokens
 * ARGV[6]  credit (USD)
 * ARGV[7]  with KEYS[2]: the create's fingerprint; ARGV[8] how long the record is kept, seconds
 * Returns  1 when created, 0 when the organization already existed (left untouched), 2 when the
 *          record holds this create (made before: nothing changed now), 3 when it holds another
 *          request.
 */
export const CREATE_ORG_LUA = `${IDEMPOTENCY_RECORD_LUA}
local before = made_before(ARGV[7])
if before then return before end
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('HSET', KEYS[1], 'name', ARGV[1], 'created', ARGV[2], 'budget_requests', ARGV[3],
  'budget_input_tokens', ARGV[4], 'budget_output_tokens', ARGV[5], 'credit', ARGV[6])
if KEYS[2] then redis.call('SET', KEYS[2], ARGV[7], 'EX', ARGV[8]) end
return 1
`;
