import { z } from 'zod';

/** Names of the six headers sent on every 200 from `POST /chat/completions`. */
export const RATE_LIMIT_HEADERS = {
  limitRequests: 'x-ratelimit-limit-requests',
  remainingRequests: 'x-ratelimit-remaining-requests',
  resetRequests: 'x-ratelimit-reset-requests',
  limitTokens: 'x-ratelimit-limit-tokens',
  remainingTokens: 'x-ratelimit-remaining-tokens',
  resetTokens: 'x-ratelimit-reset-tokens',
} as const;

/** Headers of a 429 or 402 refusal. */
export const RETRY_HEADERS = {
  retryAfter: 'retry-after',
  retryAfterMs: 'retry-after-ms',
  shouldRetry: 'x-should-retry',
} as const;

/**
 * Request header naming the organization a service key acts for (and bills): the agent session
 * service's workers send the session's organization. Any other key may only name its own.
 */
export const ORGANIZATION_HEADER = 'x-tollway-organization';

/** A duration as the reset headers write it: `0s`, `250ms`, `1s`, `1.5s`, `6m0s`, `1h2m3s`. */
export const DURATION_PATTERN = /^(?:(\d+)h)?(?:(\d+)m(?!s))?(?:(\d+(?:\.\d+)?)s)?(?:(\d+)ms)?$/;

const integerHeader = z.string().regex(/^\d+$/, 'must be a non-negative integer');
const durationHeader = z
  .string()
  .regex(DURATION_PATTERN, 'must be a duration such as 1s, 250ms or 6m0s')
  .refine((value) => value.length > 0, 'must not be empty');

export const RateLimitHeaders = z.object({
  [RATE_LIMIT_HEADERS.limitRequests]: integerHeader,
  [RATE_LIMIT_HEADERS.remainingRequests]: integerHeader,
  [RATE_LIMIT_HEADERS.resetRequests]: durationHeader,
  [RATE_LIMIT_HEADERS.limitTokens]: integerHeader,
  [RATE_LIMIT_HEADERS.remainingTokens]: integerHeader,
  [RATE_LIMIT_HEADERS.resetTokens]: durationHeader,
});
export type RateLimitHeaders = z.infer<typeof RateLimitHeaders>;

/**
 * Formats milliseconds the way the reset headers carry them: under a second as `250ms`,
 * under a minute as seconds with up to three decimals (`1s`, `1.5s`), above as `6m0s` or `1h2m3s`.
 */
export function formatRateLimitDuration(ms: number): string {
  const total = Math.max(0, Math.ceil(ms));
  if (total === 0) return '0s';
  if (total < 1000) return `${total}ms`;
  if (total < 60_000) return `${Number((total / 1000).toFixed(3))}s`;
  const totalSeconds = Math.ceil(total / 1000);
  const hours = Math.floor(totalSeconds / 3600);
  const minutes = Math.floor((totalSeconds % 3600) / 60);
  const seconds = totalSeconds % 60;
  return hours > 0 ? `${hours}h${minutes}m${seconds}s` : `${minutes}m${seconds}s`;
}

/** Parses a reset-header duration back to milliseconds; returns null when it is not one. */
export function parseRateLimitDuration(value: string): number | null {
  const match = DURATION_PATTERN.exec(value);
  if (!match || value.length === 0) return null;
  const [, h, m, s, ms] = match;
  return Number(h ?? 0) * 3_600_000 + Number(m ?? 0) * 60_000 + Math.round(Number(s ?? 0) * 1000) + Number(ms ?? 0);
}
