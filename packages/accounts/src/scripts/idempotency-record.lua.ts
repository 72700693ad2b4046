/**
 * Lua shared by the scripts that keep idempotency records (create-org, update-org): KEYS[2], when
 * given, is the record of the request made under one `Idempotency-Key`, holding its fingerprint.
 * `made_before(fingerprint)` is 2 when the record holds this request (made before), 3 when it
 * holds another one, nil when there is no record (or no KEYS[2]).
 */
export const IDEMPOTENCY_RECORD_LUA = `
local function made_before(fingerprint)
  if not KEYS[2] then return nil end
  local made = redis.call('GET', KEYS[2])
  if not made then return nil end
  if made == fingerprint then return 2 end
  return 3
end
`;
