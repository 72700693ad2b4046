import { Gauge, type Registry } from 'prom-client';
import {
  GEN_AI_BUCKETS,
  GEN_AI_LABELS,
  GEN_AI_METRICS,
  HotCounter,
  HotHistogram,
  type CounterChild,
  type HistogramChild,
} from '@tollway/telemetry';

/** How a turn ended, as counted by `tollway_turns_total`. */
export type TurnMetricOutcome = 'succeeded' | 'failed' | 'cancelled' | 'timed_out';

const TURN_OUTCOMES: readonly TurnMetricOutcome[] = ['succeeded', 'failed', 'cancelled', 'timed_out'];

/** Numbers the API reads when Prometheus scrapes it. */
export interface ApiMetricsSources {
  /** Sessions held (all organizations). */
  totalSessions(): Promise<number>;
  /** Sessions running a turn now. */
  runningSessions(): Promise<number>;
  /** Turn jobs waiting, active and delayed in the queue. */
  queueCounts(): Promise<{ waiting: number; active: number; delayed: number }>;
  /** Running and configured worker processes, cluster-wide. */
  workerStats(): Promise<{ maxWorkers: number; runningWorkers: number }>;
  /** Long-poll requests waiting in this process. */
  longPollWaiters(): number;
}

/**
 * The API's gauges, all read at scrape time from Redis, the queue and the event hub (nothing on
 * the request path). Sessions are split `running` / `idle_or_error`: the store keeps the running
 * set and the total, and telling idle from error would mean reading every session.
 */
export function registerApiMetrics(registry: Registry, sources: ApiMetricsSources): void {
  const registers = [registry];
  new Gauge({
    name: 'tollway_sessions',
    help: 'Sessions held, by status (running; idle_or_error)',
    labelNames: ['status'],
    registers,
    async collect() {
      const [total, running] = await Promise.all([sources.totalSessions(), sources.runningSessions()]);
      this.set({ status: 'running' }, running);
      this.set({ status: 'idle_or_error' }, Math.max(0, total - running));
    },
  });
  new Gauge({
    name: 'tollway_turn_queue_jobs',
    help: 'Agent-turn jobs in the queue, by state (waiting, active, delayed)',
    labelNames: ['state'],
    registers,
    async collect() {
      const counts = await sources.queueCounts();
      this.set({ state: 'waiting' }, counts.waiting);
      this.set({ state: 'active' }, counts.active);
      this.set({ state: 'delayed' }, counts.delayed);
    },
  });
  const running = new Gauge({
    name: 'tollway_workers_running',
    help: 'Worker processes executing a turn now, cluster-wide',
    registers,
  });
  new Gauge({
    name: 'tollway_workers_max',
    help: 'Configured worker processes (max_workers), cluster-wide',
    registers,
    async collect() {
      const stats = await sources.workerStats();
      this.set(stats.maxWorkers);
      running.set(stats.runningWorkers);
    },
  });
  new Gauge({
    name: 'tollway_long_poll_waiters',
    help: 'GET /sessions/{id}?wait=true requests waiting in this process',
    registers,
    collect() {
      this.set(sources.longPollWaiters());
    },
  });
}

/** A worker's counters: turns, their duration, webhook deliveries, reaper recoveries. */
export class WorkerMetrics {
  private readonly started: CounterChild;
  private readonly ended: Record<TurnMetricOutcome, [CounterChild, HistogramChild, HistogramChild]>;
  private readonly deliveries: Record<'delivered' | 'failed', [CounterChild, HistogramChild]>;
  private readonly recoveries: CounterChild;

  constructor(readonly registry: Registry) {
    this.started = new HotCounter(
      { name: 'tollway_turns_started_total', help: 'Turns whose agent started running', labelNames: [] },
      registry,
    ).child();
    const turns = new HotCounter(
      {
        name: 'tollway_turns_total',
        help: 'Turns ended, by outcome (succeeded, failed, cancelled, timed_out)',
        labelNames: ['outcome'],
      },
      registry,
    );
    const duration = new HotHistogram(
      {
        name: 'tollway_turn_duration_seconds',
        help: 'Wall-clock time of a turn from its job being taken to its end, by outcome, in seconds',
        labelNames: ['outcome'],
        buckets: GEN_AI_BUCKETS.duration,
      },
      registry,
    );
    // The turn as the agent's caller sees it: gen_ai.client.operation.duration of `invoke_agent`.
    const agentDuration = new HotHistogram(
      {
        name: GEN_AI_METRICS.clientOperationDuration.prometheus,
        help: `${GEN_AI_METRICS.clientOperationDuration.otel}: duration of an agent invocation (one turn), in seconds`,
        labelNames: [GEN_AI_LABELS.operationName, GEN_AI_LABELS.errorType],
        buckets: GEN_AI_BUCKETS.duration,
      },
      registry,
    );
    this.ended = Object.fromEntries(
      TURN_OUTCOMES.map((outcome) => [
        outcome,
        [
          turns.child(outcome),
          duration.child(outcome),
          agentDuration.child('invoke_agent', outcome === 'succeeded' ? '' : outcome),
        ],
      ]),
    ) as WorkerMetrics['ended'];
    const deliveries = new HotCounter(
      {
        name: 'tollway_webhook_deliveries_total',
        help: 'Webhook deliveries, by outcome (delivered: a 2xx; failed: anything else, never retried)',
        labelNames: ['outcome'],
      },
      registry,
    );
    const latency = new HotHistogram(
      {
        name: 'tollway_webhook_delivery_duration_seconds',
        help: 'Time of one webhook delivery attempt, by outcome, in seconds',
        labelNames: ['outcome'],
        buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
      },
      registry,
    );
    this.deliveries = {
      delivered: [deliveries.child('delivered'), latency.child('delivered')],
      failed: [deliveries.child('failed'), latency.child('failed')],
    };
    this.recoveries = new HotCounter(
      {
        name: 'tollway_reaper_recoveries_total',
        help: 'Orphaned turns (their worker died or their job was lost) ended in error by a reaper',
        labelNames: [],
      },
      registry,
    ).child();
  }

  /** A turn's agent starts. */
  turnStarted(): void {
    this.started.inc();
  }

  /** A turn ended after `seconds`. */
  turnEnded(outcome: TurnMetricOutcome, seconds: number): void {
    const [count, duration, agentDuration] = this.ended[outcome];
    count.inc();
    duration.observe(seconds);
    agentDuration.observe(seconds);
  }

  /** A webhook delivery attempt finished. */
  webhookDelivered(ok: boolean, seconds: number): void {
    const [count, latency] = this.deliveries[ok ? 'delivered' : 'failed'];
    count.inc();
    latency.observe(seconds);
  }

  /** A reaper ended an orphaned turn. */
  turnRecovered(): void {
    this.recoveries.inc();
  }
}
