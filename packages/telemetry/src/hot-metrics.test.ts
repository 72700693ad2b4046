import { Registry } from 'prom-client';
import { HotCounter, HotHistogram } from './hot-metrics';
import { parseScrape, sampleSum } from './testing/metric-samples';

describe('hot metrics', () => {
  it('expose cumulative buckets, sum and count per series, and counters, in the text format', async () => {
    const registry = new Registry();
    const histogram = new HotHistogram(
      { name: 'x_seconds', help: 'x', labelNames: ['model', 'error_type'], buckets: [0.1, 1] },
      registry,
    );
    const counter = new HotCounter({ name: 'y_total', help: 'y', labelNames: ['outcome'] }, registry);
    const ok = histogram.child('m', '');
    ok.observe(0.05);
    ok.observe(0.1); // on the bound: le="0.1" (bounds are inclusive)
    ok.observe(5);
    histogram.child('m', 'timeout');
    counter.child('admitted').inc();
    counter.child('admitted').inc(2);

    const text = await registry.metrics();
    expect(text).toContain('# TYPE x_seconds histogram');
    const scrape = parseScrape(text);
    expect(sampleSum(scrape, 'x_seconds_bucket', { model: 'm', error_type: '', le: '0.1' })).toBe(2);
    expect(sampleSum(scrape, 'x_seconds_bucket', { model: 'm', error_type: '', le: '1' })).toBe(2);
    expect(sampleSum(scrape, 'x_seconds_bucket', { model: 'm', error_type: '', le: '+Inf' })).toBe(3);
    expect(sampleSum(scrape, 'x_seconds_sum', { model: 'm', error_type: '' })).toBeCloseTo(5.15);
    expect(sampleSum(scrape, 'x_seconds_count', { error_type: 'timeout' })).toBe(0);
    expect(scrape.samples.filter((s) => s.name === 'x_seconds_count')).toHaveLength(2);
    expect(sampleSum(scrape, 'y_total', { outcome: 'admitted' })).toBe(3);
    expect(histogram.child('m', '')).toBe(ok);
    expect(() => histogram.child('m')).toThrow(/2 label values/);
  });
});
