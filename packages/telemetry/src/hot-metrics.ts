import type { Registry } from 'prom-client';

/**
 * Counters and histograms for the request path. prom-client's own `.labels(...)` children still
 * build a labels object and a hash string on every `inc`/`observe`; these children are resolved
 * once (per model, per outcome) and an update is a bucket search and two additions, with no
 * allocation. They register with a prom-client Registry like any metric (its `get()` contract),
 * so the exposition is prom-client's. A child's series exists, at zero, from its creation.
 */

interface SampleValue {
  labels: Record<string, string | number>;
  value: number;
  metricName?: string;
}

interface MetricSnapshot {
  name: string;
  help: string;
  type: 'counter' | 'histogram';
  values: SampleValue[];
  aggregator: 'sum';
}

/** Options of a labelled metric. */
export interface HotMetricOptions {
  name: string;
  help: string;
  labelNames: readonly string[];
}

/** One series of a HotCounter. */
export class CounterChild {
  value = 0;

  constructor(readonly labels: Readonly<Record<string, string>>) {}

  /** Adds `amount` (default 1). */
  inc(amount = 1): void {
    this.value += amount;
  }
}

/** One series of a HotHistogram. */
export class HistogramChild {
  /** Per-bucket (non-cumulative) counts; the last slot is +Inf. */
  readonly counts: Float64Array;
  sum = 0;
  count = 0;

  constructor(
    readonly labels: Readonly<Record<string, string>>,
    private readonly bounds: Float64Array,
  ) {
    this.counts = new Float64Array(bounds.length + 1);
  }

  /** Records one value. */
  observe(value: number): void {
    const bounds = this.bounds;
    let i = 0;
    while (i < bounds.length && value > bounds[i]!) i++;
    this.counts[i]!++;
    this.sum += value;
    this.count++;
  }
}

abstract class HotMetric<Child> {
  private readonly children = new Map<string, Child>();

  constructor(
    protected readonly options: HotMetricOptions,
    registry: Registry,
  ) {
    registry.registerMetric(this as never);
  }

  get name(): string {
    return this.options.name;
  }

  get help(): string {
    return this.options.help;
  }

  /** The series of `values` (one per label name, in order), created on first use and kept. */
  child(...values: string[]): Child {
    if (values.length !== this.options.labelNames.length) {
      throw new Error(`${this.options.name} takes ${this.options.labelNames.length} label values`);
    }
    const key = values.join('\u0000');
    let found = this.children.get(key);
    if (!found) {
      const labels = Object.fromEntries(this.options.labelNames.map((name, i) => [name, values[i]!]));
      this.children.set(key, (found = this.create(labels)));
    }
    return found;
  }

  protected series(): IterableIterator<Child> {
    return this.children.values();
  }

  protected abstract create(labels: Record<string, string>): Child;
}

/** A counter whose children are plain numbers. */
export class HotCounter extends HotMetric<CounterChild> {
  /** prom-client's Registry reads the metric through this. */
  get(): MetricSnapshot {
    const values: SampleValue[] = [];
    for (const child of this.series()) values.push({ labels: { ...child.labels }, value: child.value });
    return { name: this.name, help: this.help, type: 'counter', values, aggregator: 'sum' };
  }

  /** Clears every series (tests). */
  reset(): void {
    for (const child of this.series()) child.value = 0;
  }

  protected create(labels: Record<string, string>): CounterChild {
    return new CounterChild(labels);
  }
}

/** A histogram whose children are typed arrays of bucket counts. */
export class HotHistogram extends HotMetric<HistogramChild> {
  private readonly bounds: Float64Array;

  constructor(options: HotMetricOptions & { buckets: readonly number[] }, registry: Registry) {
    super(options, registry);
    this.bounds = Float64Array.from([...options.buckets].sort((a, b) => a - b));
  }

  /** prom-client's Registry reads the metric through this: cumulative `_bucket`s, `_sum`, `_count`. */
  get(): MetricSnapshot {
    const values: SampleValue[] = [];
    for (const child of this.series()) {
      let cumulative = 0;
      for (let i = 0; i <= this.bounds.length; i++) {
        cumulative += child.counts[i]!;
        const le = i < this.bounds.length ? this.bounds[i]! : '+Inf';
        values.push({ labels: { le, ...child.labels }, value: cumulative, metricName: `${this.name}_bucket` });
      }
      values.push({ labels: { ...child.labels }, value: child.sum, metricName: `${this.name}_sum` });
      values.push({ labels: { ...child.labels }, value: child.count, metricName: `${this.name}_count` });
    }
    return { name: this.name, help: this.help, type: 'histogram', values, aggregator: 'sum' };
  }

  protected create(labels: Record<string, string>): HistogramChild {
    return new HistogramChild(labels, this.bounds);
  }
}
