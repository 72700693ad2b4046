/** Display helpers: numbers, money and times as people read them. */

const integer = new Intl.NumberFormat('en', { maximumFractionDigits: 0 });
const usd = new Intl.NumberFormat('en', { style: 'currency', currency: 'USD', maximumFractionDigits: 6 });

export function formatInteger(value: number): string {
  return integer.format(value);
}

export function formatUsd(value: number): string {
  return usd.format(value);
}

/** Unix seconds as a local date and time; a dash for null. */
export function formatTime(seconds: number | null): string {
  if (seconds === null) return '—';
  return new Date(seconds * 1000).toLocaleString('en', { dateStyle: 'medium', timeStyle: 'short' });
}
