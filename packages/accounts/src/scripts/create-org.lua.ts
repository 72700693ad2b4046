/**
 * Creates an organization unless one with that id exists.
 *
 * KEYS[1]  the organization hash ({org:<id>}:org)
 * ARGV[1]  name
 * ARGV[2]  created (unix seconds)
 * ARGV[3]  budget_requests    ARGV[4] budget_input_tokens    ARGV[5] budget_output_tokens
 * ARGV[6]  credit (USD)
 * Returns  1 when created, 0 when the organization already existed (left untouched).
 */
export const CREATE_ORG_LUA = `
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('HSET', KEYS[1], 'name', ARGV[1], 'created', ARGV[2], 'budget_requests', ARGV[3],
  'budget_input_tokens', ARGV[4], 'budget_output_tokens', ARGV[5], 'credit', ARGV[6])
return 1
`;
