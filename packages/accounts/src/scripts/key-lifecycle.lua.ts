/**
 * The steps of a key's life that must not interleave with its organization's deletion. Each runs
 * on the organization's hash tag alone (Redis Cluster safe); the global key index is written
 * around them by AccountStore, which checks again after making a key usable (see registerKey).
 */

/**
 * Records a new key in its organization, only while the organization exists and holds fewer than
 * the most keys one may (live and revoked: a revoked key's record stays, listed, so only counting
 * both bounds what one organization stores). At that many, the new key takes the place of the key
 * revoked longest ago, whose record is forgotten (its hash index entry went with its revocation),
 * so an organization that rotates its keys can always make a new one; with none revoked, it is
 * refused. The count and the write are one step, so keys created at once cannot take an
 * organization past it. After DELETE_ORG_LUA has run, no key can join the organization's set, so
 * none escapes its revocation.
 *
 * KEYS[1]  the organization hash     KEYS[2]  the organization's key set
 * KEYS[3]  the key's record
 * ARGV[1]  key id; ARGV[2] the most keys the organization may hold; ARGV[3] the prefix of a key
 *          record's name, to which a key id is appended (same hash slot as KEYS[1..3]);
 *          ARGV[4..] the record's field/value pairs
 * Returns  { 1, id and key hash of the revoked key forgotten, or '' and '' } when recorded, { 0 }
 *          when the organization does not exist, { 2 } when it holds ARGV[2] keys, none revoked
 *          (nothing written either way). "Longest ago" reads `revoked_at_ms` (older records:
 *          `revoked_at`, seconds).
 */
export const ACTIVATE_KEY_LUA = `
if redis.call('EXISTS', KEYS[1]) == 0 then return {0} end
local forgotten = ''
local forgottenHash = ''
if redis.call('SCARD', KEYS[2]) >= tonumber(ARGV[2]) then
  local oldest = nil
  for _, id in ipairs(redis.call('SMEMBERS', KEYS[2])) do
    local at = redis.call('HMGET', ARGV[3] .. id, 'revoked_at_ms', 'revoked_at')
    local revoked = tonumber(at[1] or '') or ((tonumber(at[2] or '') or -1) * 1000)
    if revoked >= 0 and (oldest == nil or revoked < oldest or (revoked == oldest and id < forgotten)) then
      oldest = revoked
      forgotten = id
    end
  end
  if oldest == nil then return {2} end
  forgottenHash = redis.call('HGET', ARGV[3] .. forgotten, 'hash') or ''
  redis.call('DEL', ARGV[3] .. forgotten)
  redis.call('SREM', KEYS[2], forgotten)
end
redis.call('HSET', KEYS[3], unpack(ARGV, 4))
redis.call('SADD', KEYS[2], ARGV[1])
return {1, forgotten, forgottenHash}
`;

/**
 * Deletes an organization's record, buckets and slices at once and lists its keys, from which no
 * key can be added any more (ACTIVATE_KEY_LUA needs the organization), for the caller to revoke.
 * The id is retired: a tombstone, kept for good, stops CREATE_ORG_LUA from giving it to a new
 * organization. The deletion is published in the same step, so every key authenticator drops the
 * organization's cached keys even if the caller dies before revoking them one by one (from then on
 * an authenticator refuses them anyway: their organization is gone).
 *
 * KEYS[1]  the organization hash     KEYS[2]  the organization's key set
 * KEYS[3]  its buckets               KEYS[4]  its quota slices
 * KEYS[5]  its tombstone
 * ARGV[1]  now (unix seconds), what the tombstone holds
 * ARGV[2]  the organization-change channel    ARGV[3]  the organization id
 * Returns  { 1 when the organization existed else 0, the key ids }
 */
export const DELETE_ORG_LUA = `
local existed = redis.call('EXISTS', KEYS[1])
redis.call('DEL', KEYS[1], KEYS[3], KEYS[4])
if existed == 1 then redis.call('SET', KEYS[5], ARGV[1]) end
redis.call('PUBLISH', ARGV[2], ARGV[3])
return { existed, redis.call('SMEMBERS', KEYS[2]) }
`;

/**
 * Whether a key just made usable still belongs to a live organization and is not revoked (an
 * organization deleted meanwhile revoked its keys, or removed their records).
 *
 * KEYS[1]  the organization hash     KEYS[2]  the key's record
 * Returns  1 when the key may stay usable, else 0
 */
export const KEY_STILL_LIVE_LUA = `
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
local record = redis.call('HMGET', KEYS[2], 'id', 'revoked_at')
if not record[1] then return 0 end
if record[2] and record[2] ~= '' then return 0 end
return 1
`;
