/**
 * Updates an existing organization; never creates one (so an update racing a delete is a no-op).
 *
 * KEYS[1]  the organization hash ({org:<id>}:org)
 * ARGV[1]  new name, or '' to keep it
 * ARGV[2]  budget_requests, ARGV[3] budget_input_tokens, ARGV[4] budget_output_tokens: '' keeps
 * ARGV[5]  credit to add in USD (may be negative), or '' for none
 * Returns  1 when updated, 0 when there is no such organization.
 */
export const UPDATE_ORG_LUA = `
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
if ARGV[1] ~= '' then redis.call('HSET', KEYS[1], 'name', ARGV[1]) end
if ARGV[2] ~= '' then redis.call('HSET', KEYS[1], 'budget_requests', ARGV[2]) end
if ARGV[3] ~= '' then redis.call('HSET', KEYS[1], 'budget_input_tokens', ARGV[3]) end
if ARGV[4] ~= '' then redis.call('HSET', KEYS[1], 'budget_output_tokens', ARGV[4]) end
if ARGV[5] ~= '' then redis.call('HINCRBYFLOAT', KEYS[1], 'credit', ARGV[5]) end
return 1
`;
