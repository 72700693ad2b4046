import type { SessionLimits } from './account.types';

/** The session limits, in the order scripts and fingerprints take them. */
export const SESSION_LIMIT_NAMES = ['sessions', 'runningTurns', 'waitingTurns', 'weight'] as const;
export type SessionLimitName = (typeof SESSION_LIMIT_NAMES)[number];

/**
 * The field of the organization hash (AccountKeys.org) that holds each session limit, as a decimal
 * integer; an absent field is the session service's configured default.
 */
export const SESSION_LIMIT_FIELDS: Readonly<Record<SessionLimitName, string>> = {
  sessions: 'limit_sessions',
  runningTurns: 'limit_running_turns',
  waitingTurns: 'limit_waiting_turns',
  weight: 'turn_weight',
};

/** What each session limit may be, inclusive (the admin API's schema holds the same bounds). */
export const SESSION_LIMIT_BOUNDS: Readonly<Record<SessionLimitName, { min: number; max: number }>> = {
  sessions: { min: 1, max: 1_000_000_000 },
  runningTurns: { min: 1, max: 1_000_000 },
  waitingTurns: { min: 1, max: 1_000_000_000 },
  weight: { min: 1, max: 1000 },
};

/** Every limit null: each the session service's default. */
export function defaultSessionLimits(): SessionLimits {
  return { sessions: null, runningTurns: null, waitingTurns: null, weight: null };
}

/** True when `value` is an integer within the bounds of limit `name`. */
export function isSessionLimitInBounds(name: SessionLimitName, value: number): boolean {
  const { min, max } = SESSION_LIMIT_BOUNDS[name];
  return Number.isSafeInteger(value) && value >= min && value <= max;
}

/**
 * The session limits stored in an organization hash (HGETALL's answer, or the four fields by name).
 * A field that is absent, or holds anything but a decimal integer within its bounds (only a hand
 * edit could write one), reads as null: the session service's default.
 */
export function parseSessionLimits(hash: Readonly<Record<string, string | null | undefined>>): SessionLimits {
  const limits = defaultSessionLimits();
  for (const name of SESSION_LIMIT_NAMES) {
    const text = hash[SESSION_LIMIT_FIELDS[name]];
    if (typeof text !== 'string' || !/^[0-9]{1,10}$/.test(text)) continue;
    const value = Number(text);
    if (isSessionLimitInBounds(name, value)) limits[name] = value;
  }
  return limits;
}

/** The first limit given that is neither null nor an integer within its bounds; null when all are. */
export function invalidSessionLimit(limits: Partial<SessionLimits> | undefined): SessionLimitName | null {
  for (const name of SESSION_LIMIT_NAMES) {
    const value = limits?.[name];
    if (value !== undefined && value !== null && !isSessionLimitInBounds(name, value)) return name;
  }
  return null;
}
