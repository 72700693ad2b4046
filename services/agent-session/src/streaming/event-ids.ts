import { SESSION_EVENT_ID } from '@tollway/contracts';

const MAX_PART = (1n << 64n) - 1n;

/**
 * An event id a client sent (`Last-Event-ID` or `last_event_id`) in the canonical form Redis
 * writes (no leading zeros), or null when it is not one: `<ms>-<seq>`, each a 64-bit unsigned number.
 */
export function parseEventId(raw: string): string | null {
  if (!SESSION_EVENT_ID.test(raw)) return null;
  const [ms, seq] = raw.split('-').map((part) => BigInt(part)) as [bigint, bigint];
  if (ms > MAX_PART || seq > MAX_PART) return null;
  return `${ms}-${seq}`;
}

/** Orders two canonical stream ids (as Redis writes them): negative, zero or positive. */
export function compareEventIds(a: string, b: string): number {
  const dashA = a.indexOf('-');
  const dashB = b.indexOf('-');
  return (
    dashA - dashB ||
    compareDigits(a.slice(0, dashA), b.slice(0, dashB)) ||
    a.length - dashA - (b.length - dashB) ||
    compareDigits(a.slice(dashA + 1), b.slice(dashB + 1))
  );
}

/** Decimal strings of the same length, without leading zeros: their order is the text's. */
function compareDigits(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
