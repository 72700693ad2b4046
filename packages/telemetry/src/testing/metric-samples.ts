// The parser ships no types: its declaration travels with this file to every test that imports it.
// eslint-disable-next-line @typescript-eslint/triple-slash-reference
/// <reference path="./parse-prometheus-text-format.d.ts" />
import parsePrometheusTextFormat from 'parse-prometheus-text-format';

/** One sample line of a scrape: series name (with `_bucket`/`_sum`/`_count`), labels and value. */
export interface MetricSample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

/** A parsed scrape: family types by name, and every sample. */
export interface Scrape {
  types: Map<string, string>;
  samples: MetricSample[];
}

/**
 * Parses Prometheus text with parse-prometheus-text-format. That parser folds every labelled
 * series of a histogram into one (its 1.1.1 keeps the buckets of the last series only), so
 * histogram families are read series by series: their TYPE line is kept aside for `types` and
 * their `_bucket`, `_sum` and `_count` lines are parsed as the plain samples they are.
 */
export function parseScrape(text: string): Scrape {
  const types = new Map<string, string>();
  const histograms = new Set<string>();
  for (const match of text.matchAll(/^# TYPE (\S+) (\S+)$/gm)) {
    types.set(match[1]!, match[2]!);
    if (match[2] === 'histogram') histograms.add(match[1]!);
  }
  const plain = text.replace(/^# TYPE (\S+) histogram$/gm, '# TYPE $1 untyped');
  const samples: MetricSample[] = [];
  for (const family of parsePrometheusTextFormat(plain)) {
    for (const sample of family.metrics) {
      if (sample.value === undefined) continue;
      samples.push({ name: family.name, labels: sample.labels ?? {}, value: Number(sample.value) });
    }
  }
  return { types, samples };
}

/** Sum of the values of series `name` whose labels include `labels`. */
export function sampleSum(scrape: Scrape, name: string, labels: Record<string, string> = {}): number {
  let total = 0;
  for (const sample of scrape.samples) {
    if (sample.name !== name) continue;
    if (Object.entries(labels).every(([key, value]) => sample.labels[key] === value)) total += sample.value;
  }
  return total;
}

/** Fetches and parses `url` (a `/metrics` endpoint); throws unless it answers 200 in the text format. */
export async function scrape(url: string): Promise<Scrape> {
  const res = await fetch(url);
  if (res.status !== 200) throw new Error(`GET ${url}: ${res.status}`);
  const type = res.headers.get('content-type') ?? '';
  if (!type.startsWith('text/plain')) throw new Error(`GET ${url}: content-type ${type}`);
  return parseScrape(await res.text());
}
