import { Counter, Gauge, type Registry } from 'prom-client';
import { observeScriptCalls } from '@tollway/accounts';
import { SESSION_STATUSES, type SessionStatus } from '@tollway/contracts';
import type { ChatCallEnd } from '../agents/gateway-client';
import { modelLabelOf, OTHER_MODEL } from './model-label';
import { CHAT_PROVIDER } from './turn-trace';
import {
  GEN_AI_BUCKETS,
  GEN_AI_LABELS,
  GEN_AI_METRICS,
  HotCounter,
  HotHistogram,
  scriptCallMetrics,
  type CounterChild,
  type HistogramChild,
} from '@tollway/telemetry';

/**
 * Distinct models given a series of their own by the worker's client metrics; calls to further
 * models (the agent may take the model from `user_params`) share the `_OTHER` series, so a client
 * cannot grow the label set without bound.
 */
export const MAX_CHAT_MODELS = 64;

/** The series of one model's chat calls. */
interface ChatSeries {
  /** The model label: the model, or OTHER_MODEL. */
  label: string;
  duration: HistogramChild;
  inputTokens: HistogramChild;
  outputTokens: HistogramChild;
  /** Duration of failed calls, by `error.type` (resolved on first use of each type). */
  failed: Map<string, HistogramChild>;
}

/** How a turn ended, as counted by `tollway_turns_total`. */
export type TurnMetricOutcome = 'succeeded' | 'failed' | 'cancelled' | 'timed_out';

const CLIENT_LABELS = [GEN_AI_LABELS.operationName, GEN_AI_LABELS.providerName, GEN_AI_LABELS.requestModel];
const CLIENT_LABELS_WITH_ERROR = [...CLIENT_LABELS, GEN_AI_LABELS.errorType];

const TURN_OUTCOMES: readonly TurnMetricOutcome[] = ['succeeded', 'failed', 'cancelled', 'timed_out'];

/** Numbers the API reads when Prometheus scrapes it. */
export interface ApiMetricsSources {
  /** Sessions held per status (all organizations). */
  sessionsByStatus(): Promise<Record<SessionStatus, number>>;
  /** Turns waiting for a worker and executing, cluster-wide. */
  queueCounts(): Promise<{ waiting: number; active: number }>;
  /** Running and configured worker processes, cluster-wide. */
  workerStats(): Promise<{ maxWorkers: number; runningWorkers: number }>;
  /** Long-poll requests waiting in this process. */
  longPollWaiters(): number;
  /** Event streams open in this process; absent: not served. */
  eventStreams?(): number;
}

/**
 * The API's gauges, all read at scrape time from Redis, the queue and the event hub (nothing on
 * the request path). Sessions by status are the store's own counts, kept by the scripts that
 * change a status (three O(1) reads per scrape).
 */
export function registerApiMetrics(registry: Registry, sources: ApiMetricsSources): void {
  const registers = [registry];
  const readErrors = new Counter({
    name: 'tollway_metrics_read_errors_total',
    help: 'Scrapes that could not read a gauge from Redis, by gauge; the gauge is left out of that scrape',
    labelNames: ['gauge'],
    registers,
  });
  /**
   * Reads a Redis-backed gauge for a scrape. When Redis cannot answer (an outage, a reply timeout)
   * the gauge is left out of this scrape instead of failing it: the process's other series are
   * what an operator needs most during an outage.
   */
  const fromRedis = async (name: string, gauge: Gauge, read: () => Promise<void>) => {
    try {
      await read();
    } catch {
      // reset() leaves a gauge without labels at 0, which would read as "no workers": remove() drops it.
      if (LABEL_LESS.has(gauge)) gauge.remove();
      else gauge.reset();
      // A scrape collects every metric at once, so this count shows from the next scrape on.
      readErrors.inc({ gauge: name });
    }
  };
  new Gauge({
    name: 'tollway_sessions',
    help: 'Sessions held, by status (idle, running, error)',
    labelNames: ['status'],
    registers,
    collect() {
      return fromRedis('tollway_sessions', this, async () => {
        const counts = await sources.sessionsByStatus();
        for (const status of SESSION_STATUSES) this.set({ status }, counts[status]);
      });
    },
  });
  new Gauge({
    name: 'tollway_turn_queue_jobs',
    help: 'Agent turns accepted and not ended, by state (waiting: for a worker; active: executing), cluster-wide',
    labelNames: ['state'],
    registers,
    collect() {
      return fromRedis('tollway_turn_queue_jobs', this, async () => {
        const counts = await sources.queueCounts();
        this.set({ state: 'waiting' }, counts.waiting);
        this.set({ state: 'active' }, counts.active);
      });
    },
  });
  // A scrape collects every metric at once: the two worker gauges share one read of the registry,
  // and each is set from it in its own collect (set in the other's, one would show the scrape before).
  let workerStatsRead: ReturnType<ApiMetricsSources['workerStats']> | null = null;
  const workerStats = () =>
    (workerStatsRead ??= sources.workerStats().finally(() => {
      workerStatsRead = null;
    }));
  const running = new Gauge({
    name: 'tollway_workers_running',
    help: 'Worker processes executing a turn now, cluster-wide',
    registers,
    collect() {
      return fromRedis('tollway_workers_running', this, async () => this.set((await workerStats()).runningWorkers));
    },
  });
  const max = new Gauge({
    name: 'tollway_workers_max',
    help: 'Configured worker processes (max_workers), cluster-wide',
    registers,
    collect() {
      return fromRedis('tollway_workers_max', this, async () => this.set((await workerStats()).maxWorkers));
    },
  });
  const LABEL_LESS = new Set<Gauge>([running, max]);

  new Gauge({
    name: 'tollway_long_poll_waiters',
    help: 'GET /sessions/{id}?wait=true requests waiting in this process',
    registers,
    collect() {
      this.set(sources.longPollWaiters());
    },
  });
  const { eventStreams } = sources;
  if (eventStreams) {
    new Gauge({
      name: 'tollway_event_streams_open',
      help: 'GET /sessions/{id}/events streams (and sends answered as streams) open in this process',
      registers,
      collect() {
        this.set(eventStreams());
      },
    });
  }
}

/**
 * Counts this process's Lua script calls (the session store's, the worker registry's, the key
 * authenticator's) in `tollway_redis_script_*` of `registry`, by script name. One per process.
 */
export function countScriptCalls(registry: Registry): void {
  observeScriptCalls(scriptCallMetrics(registry));
}

/** A worker's counters: turns, their duration, webhook deliveries, reaper recoveries. */
export class WorkerMetrics {
  private readonly started: CounterChild;
  private readonly queueWait: HistogramChild;
  private readonly ended: Record<TurnMetricOutcome, [CounterChild, HistogramChild, HistogramChild]>;
  private readonly deliveries: Record<'delivered' | 'failed', [CounterChild, HistogramChild]>;
  private readonly recoveries: CounterChild;
  private readonly clientDuration: HotHistogram;
  private readonly tokenUsage: HotHistogram;
  private readonly chatSeries = new Map<string, ChatSeries>();

  constructor(readonly registry: Registry) {
    this.started = new HotCounter(
      { name: 'tollway_turns_started_total', help: 'Turns whose agent started running', labelNames: [] },
      registry,
    ).child();
    this.queueWait = new HotHistogram(
      {
        name: 'tollway_turn_queue_wait_seconds',
        help: 'Time a turn waited from its acceptance (202) to a worker claiming it, in seconds (all organizations together)',
        labelNames: [],
        buckets: [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600],
      },
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
        help: 'Wall-clock time of a turn from a worker claiming it to its end, by outcome, in seconds',
        labelNames: ['outcome'],
        buckets: GEN_AI_BUCKETS.duration,
      },
      registry,
    );
    // gen_ai.client.operation.duration of `invoke_agent` (the turn, as the agent's caller sees
    // it; no request model) and of `chat` (each model call the agent makes, by request model).
    this.clientDuration = new HotHistogram(
      {
        name: GEN_AI_METRICS.clientOperationDuration.prometheus,
        help: `${GEN_AI_METRICS.clientOperationDuration.otel}: duration of an agent invocation (invoke_agent: one turn) or of one of its model calls (chat), in seconds`,
        labelNames: CLIENT_LABELS_WITH_ERROR,
        buckets: GEN_AI_BUCKETS.duration,
      },
      registry,
    );
    this.tokenUsage = new HotHistogram(
      {
        name: GEN_AI_METRICS.clientTokenUsage.prometheus,
        help: `${GEN_AI_METRICS.clientTokenUsage.otel}: tokens of one model call of an agent (input and output), as the gateway answered`,
        labelNames: [...CLIENT_LABELS, GEN_AI_LABELS.tokenType],
        buckets: GEN_AI_BUCKETS.tokens,
      },
      registry,
    );
    this.ended = Object.fromEntries(
      TURN_OUTCOMES.map((outcome) => [
        outcome,
        [
          turns.child(outcome),
          duration.child(outcome),
          this.clientDuration.child('invoke_agent', CHAT_PROVIDER, '', outcome === 'succeeded' ? '' : outcome),
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

  /** A worker claimed a turn that waited `seconds` since its acceptance. */
  turnDequeued(seconds: number): void {
    this.queueWait.observe(seconds);
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

  /** A model call of an agent ended after `seconds` (timed in its turn's child process). */
  chatCallEnded(model: string, seconds: number, outcome: ChatCallEnd): void {
    const series = this.chatSeriesOf(model, !outcome.errorType);
    if (outcome.errorType) {
      let failed = series.failed.get(outcome.errorType);
      if (!failed) {
        failed = this.clientDuration.child('chat', CHAT_PROVIDER, series.label, outcome.errorType);
        series.failed.set(outcome.errorType, failed);
      }
      failed.observe(seconds);
      return;
    }
    series.duration.observe(seconds);
    if (outcome.inputTokens !== undefined) series.inputTokens.observe(outcome.inputTokens);
    if (outcome.outputTokens !== undefined) series.outputTokens.observe(outcome.outputTokens);
  }

  /**
   * The series of `model`. Only a call that `succeeded` gives a model a series of its own: a
   * model the gateway does not serve only fails, so names made up by callers cannot take the
   * MAX_CHAT_MODELS slots from the catalog's models (a model's failures before its first success
   * count under OTHER_MODEL).
   */
  private chatSeriesOf(model: string, succeeded: boolean): ChatSeries {
    let series = this.chatSeries.get(model);
    if (series) return series;
    const label = succeeded && this.chatSeries.size < MAX_CHAT_MODELS ? modelLabelOf(model) : OTHER_MODEL;
    series = this.chatSeries.get(label) ?? {
      label,
      duration: this.clientDuration.child('chat', CHAT_PROVIDER, label, ''),
      inputTokens: this.tokenUsage.child('chat', CHAT_PROVIDER, label, 'input'),
      outputTokens: this.tokenUsage.child('chat', CHAT_PROVIDER, label, 'output'),
      failed: new Map(),
    };
    this.chatSeries.set(label, series);
    return series;
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
