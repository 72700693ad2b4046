/** Display helpers: numbers, money and times as people read them. */

const integer = new Intl.NumberFormat('en', { maximumFractionDigits: 0 });
const usd = new Intl.NumberFormat('en', { style: 'currency', currency: 'USD', maximumFractionDigits: 6 });

export function formatInteger(value: number): string {
  return integer.format(value);
}

const compact = new Intl.NumberFormat('en', { notation: 'compact', maximumFractionDigits: 2 });

/**
 * A count as an axis label: compact past a thousand (`950`, `1.5K`, `12.5K`, `2M`), at most five
 * characters, so the label fits the chart's fixed axis width ("100,000" in full was cut to ".00,000").
 */
export function formatAxisCount(value: number): string {
  return compact.format(value);
}

export function formatUsd(value: number): string {
  return usd.format(value);
}

/** Unix seconds as a local date and time; a dash for null. */
export function formatTime(seconds: number | null): string {
  if (seconds === null) return '—';
  return new Date(seconds * 1000).toLocaleString('en', { dateStyle: 'medium', timeStyle: 'short' });
}
