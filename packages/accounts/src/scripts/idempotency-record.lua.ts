/**
 * Lua shared by the scripts that keep idempotency records (create-org, update-org): `record`, when
 * given (a key of the script's KEYS), is the record of the request made under one
 * `Idempotency-Key`, holding its fingerprint. `made_before(record, fingerprint)` is 2 when the
 * record holds this request (made before), 3 when it holds another one, nil when there is no
 * record (or no `record`).
 */
export const IDEMPOTENCY_RECORD_LUA = `
local function made_before(record, fingerprint)
  if not record then return nil end
  local made = redis.call('GET', record)
  if not made then return nil end
  if made == fingerprint then return 2 end
  return 3
end
`;
