import { hash, randomBytes, timingSafeEqual } from 'node:crypto';

/** Every API key starts with this. */
export const API_KEY_PREFIX = 'tw-';

/** What a well-formed key looks like; anything else is refused without a Redis call. */
export const API_KEY_PATTERN = /^tw-[A-Za-z0-9_-]{32,128}$/;

/** A new random key: `tw-` + 32 random bytes in base64url (43 characters). */
export function generateApiKey(): string {
  return API_KEY_PREFIX + randomBytes(32).toString('base64url');
}

/** True when `value` has the shape of an API key. */
export function isWellFormedApiKey(value: unknown): value is string {
  return typeof value === 'string' && API_KEY_PATTERN.test(value);
}

/** SHA-256 of a key, hex: the only form in which a key is stored. */
export function hashApiKey(key: string): string {
  // One-shot hash: a third of createHash's cost, and this runs on every request.
  return hash('sha256', key, 'hex');
}

/** Compares two SHA-256 hex digests in constant time. */
export function sameKeyHash(a: string, b: string): boolean {
  const left = Buffer.from(a, 'hex');
  const right = Buffer.from(b, 'hex');
  return left.length === 32 && right.length === 32 && timingSafeEqual(left, right);
}

/** The displayable form of a key: prefix and last four characters. */
export function redactApiKey(last4: string): string {
  return `${API_KEY_PREFIX}…${last4}`;
}
