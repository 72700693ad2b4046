import { Counter, Gauge, type Registry } from 'prom-client';
import { observeScriptCalls } from '@tollway/accounts';
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
import type { AdmissionStats } from '../admission/admission.types';
import { registerRoutingMetrics } from './routing-metrics';
import type { EngineRegistry } from '../engines';
import type { PromptTokenStats } from '../tokenizer/count-tokens';

/** Admission outcomes counted by `tollway_admission_decisions_total`. */
export type AdmissionOutcome =
  | 'admitted'
  | 'requests'
  | 'input_tokens'
  | 'output_tokens'
  | 'insufficient_quota'
  | 'provider_overloaded'
  | 'unauthorized';

const ADMISSION_OUTCOMES: readonly AdmissionOutcome[] = [
  'admitted',
  'requests',
  'input_tokens',
  'output_tokens',
  'insufficient_quota',
  'provider_overloaded',
  'unauthorized',
];

const OPERATION = 'chat';
const MODEL_LABELS = [
  GEN_AI_LABELS.operationName,
  GEN_AI_LABELS.providerName,
  GEN_AI_LABELS.requestModel,
  GEN_AI_LABELS.responseModel,
] as const;

/**
 * The series of one model, resolved once and reused by every request of that model: the request
 * path only calls `observe` on them (no label lookup, no allocation; see HotHistogram).
 */
export interface ModelMetrics {
  readonly modelId: string;
  readonly provider: string;
  readonly requestDuration: HistogramChild;
  readonly timeToFirstToken: HistogramChild;
  readonly timePerOutputToken: HistogramChild;
  readonly inputTokens: HistogramChild;
  readonly outputTokens: HistogramChild;
  /** Request duration of failed requests, by `error.type` (resolved on first use of each type). */
  failed(errorType: string): HistogramChild;
}

/** Where the gauges read at scrape time come from. */
export interface GatewayMetricsSources {
  engines: EngineRegistry;
  admissionStats?: () => AdmissionStats;
  promptTokenStats?: () => PromptTokenStats;
}

/**
 * Every metric the gateway exports. Request-path updates go through pre-resolved children
 * (`forModel`, `admission`); state that already lives somewhere (replicas, slices, leases) is read
 * when Prometheus scrapes, so it costs the request path nothing.
 */
export class GatewayMetrics {
  private readonly requestDuration: HotHistogram;
  private readonly timeToFirstToken: HotHistogram;
  private readonly timePerOutputToken: HotHistogram;
  private readonly tokenUsage: HotHistogram;
  private readonly models = new Map<string, Map<string, ModelMetrics>>();
  private readonly admissionChildren: Record<AdmissionOutcome, CounterChild>;
  /** SSE responses being written now (read by the `tollway_sse_streams_open` gauge at scrape time). */
  sseStreamsOpen = 0;

  constructor(
    readonly registry: Registry,
    sources: GatewayMetricsSources,
  ) {
    const registers = [registry];
    this.requestDuration = new HotHistogram(
      {
        name: GEN_AI_METRICS.serverRequestDuration.prometheus,
        help: `${GEN_AI_METRICS.serverRequestDuration.otel}: time from the request's arrival to its last byte, in seconds`,
        labelNames: [...MODEL_LABELS, GEN_AI_LABELS.errorType],
        buckets: [...GEN_AI_BUCKETS.duration],
      },
      registry,
    );
    this.timeToFirstToken = new HotHistogram(
      {
        name: GEN_AI_METRICS.serverTimeToFirstToken.prometheus,
        help: `${GEN_AI_METRICS.serverTimeToFirstToken.otel}: time from the request's arrival to the first chunk of a successful stream, in seconds`,
        labelNames: MODEL_LABELS,
        buckets: [...GEN_AI_BUCKETS.timeToFirstToken],
      },
      registry,
    );
    this.timePerOutputToken = new HotHistogram(
      {
        name: GEN_AI_METRICS.serverTimePerOutputToken.prometheus,
        help: `${GEN_AI_METRICS.serverTimePerOutputToken.otel}: time per output token after the first of a successful stream, in seconds`,
        labelNames: MODEL_LABELS,
        buckets: [...GEN_AI_BUCKETS.timePerOutputToken],
      },
      registry,
    );
    this.tokenUsage = new HotHistogram(
      {
        name: GEN_AI_METRICS.clientTokenUsage.prometheus,
        help: `${GEN_AI_METRICS.clientTokenUsage.otel}: tokens per request as settled (input and output), as the gateway's clients consume them`,
        labelNames: [...MODEL_LABELS, GEN_AI_LABELS.tokenType],
        buckets: [...GEN_AI_BUCKETS.tokens],
      },
      registry,
    );
    const admissions = new HotCounter(
      {
        name: 'tollway_admission_decisions_total',
        help: 'Admission decisions by outcome: admitted, or the reason of the refusal (the exhausted budget, insufficient_quota, provider_overloaded, unauthorized)',
        labelNames: ['outcome'],
      },
      registry,
    );
    this.admissionChildren = Object.fromEntries(
      ADMISSION_OUTCOMES.map((outcome) => [outcome, admissions.child(outcome)]),
    ) as Record<AdmissionOutcome, CounterChild>;
    const streamsOpen = () => this.sseStreamsOpen;
    new Gauge({
      name: 'tollway_sse_streams_open',
      help: 'Server-sent-event responses being written now',
      registers,
      collect() {
        this.set(streamsOpen());
      },
    });
    // Redis script calls (admit, settle, return, admin scripts) and their round-trip latency.
    observeScriptCalls(scriptCallMetrics(registry));
    registerReplicaMetrics(registers, sources.engines);
    registerRoutingMetrics(registers, sources.engines);
    if (sources.admissionStats) registerAdmissionMetrics(registers, sources.admissionStats);
    if (sources.promptTokenStats) registerPromptTokenMetrics(registers, sources.promptTokenStats);
  }

  /** Counts one admission decision. */
  admission(outcome: AdmissionOutcome): void {
    this.admissionChildren[outcome].inc();
  }

  /** The children of `modelId` served by an engine of kind `provider` (resolved on first use). */
  forModel(modelId: string, provider: string): ModelMetrics {
    let byProvider = this.models.get(provider);
    if (!byProvider) this.models.set(provider, (byProvider = new Map()));
    let found = byProvider.get(modelId);
    if (!found) byProvider.set(modelId, (found = this.resolve(modelId, provider)));
    return found;
  }

  private resolve(modelId: string, provider: string): ModelMetrics {
    const labels = [OPERATION, provider, modelId, modelId] as const;
    const failures = new Map<string, HistogramChild>();
    return {
      modelId,
      provider,
      requestDuration: this.requestDuration.child(...labels, ''),
      timeToFirstToken: this.timeToFirstToken.child(...labels),
      timePerOutputToken: this.timePerOutputToken.child(...labels),
      inputTokens: this.tokenUsage.child(...labels, 'input'),
      outputTokens: this.tokenUsage.child(...labels, 'output'),
      failed: (errorType) => {
        let child = failures.get(errorType);
        if (!child) failures.set(errorType, (child = this.requestDuration.child(...labels, errorType)));
        return child;
      },
    };
  }
}

/** Engine replicas: in-flight, errors, retries, health, read from the engines at scrape time. */
function registerReplicaMetrics(registers: Registry[], engines: EngineRegistry): void {
  const labelNames = ['model', 'replica'];
  const each = (read: (model: string, replica: import('../engines/engine.types').ReplicaStats) => void) => {
    for (const [model, engine] of engines.entries())
      for (const replica of engine.replicaStats?.() ?? []) read(model, replica);
  };
  new Gauge({
    name: 'tollway_engine_replica_in_flight',
    help: 'Requests sent to an engine replica and not yet finished',
    labelNames,
    registers,
    collect() {
      this.reset();
      each((model, replica) => this.set({ model, replica: replica.origin }, replica.outstanding));
    },
  });
  new Gauge({
    name: 'tollway_engine_replica_up',
    help: 'Result of the last readiness probe of an engine replica (1 answering, 0 not)',
    labelNames,
    registers,
    collect() {
      this.reset();
      each((model, replica) => this.set({ model, replica: replica.origin }, replica.healthy ? 1 : 0));
    },
  });
  new Gauge({
    name: 'tollway_engine_replica_load',
    help: "The load routing sees on an engine replica: the engine's running + waiting requests (vLLM metrics, scraped) when fresh, else in flight",
    labelNames,
    registers,
    collect() {
      this.reset();
      each((model, replica) => this.set({ model, replica: replica.origin }, replica.load));
    },
  });
  new Counter({
    name: 'tollway_engine_replica_errors_total',
    help: 'Failed sends to an engine replica: connect errors, timeouts, 5xx answers',
    labelNames,
    registers,
    collect() {
      this.reset();
      each((model, replica) => this.inc({ model, replica: replica.origin }, replica.errors));
    },
  });
  new Counter({
    name: 'tollway_engine_replica_retries_total',
    help: 'Sends to an engine replica tried again on another replica before the first byte',
    labelNames,
    registers,
    collect() {
      this.reset();
      each((model, replica) => this.inc({ model, replica: replica.origin }, replica.retries));
    },
  });
}

/** Quota slices, slice grants, capacity leases and their renewals, read from admission at scrape time. */
function registerAdmissionMetrics(registers: Registry[], stats: () => AdmissionStats): void {
  new Gauge({
    name: 'tollway_quota_slices_held',
    help: 'Quota slices this replica holds (local admission)',
    registers,
    collect() {
      this.set(stats().slicesHeld);
    },
  });
  new Counter({
    name: 'tollway_quota_slice_grants_total',
    help: 'Quota slices granted to this replica (each renews an organization slice)',
    registers,
    collect() {
      this.reset();
      this.inc(stats().sliceGrants);
    },
  });
  new Counter({
    name: 'tollway_capacity_lease_renewals_total',
    help: 'Renewal rounds of the capacity leases this replica holds',
    registers,
    collect() {
      this.reset();
      this.inc(stats().leaseRenewals);
    },
  });
  new Counter({
    name: 'tollway_settlement_retries_total',
    help: 'Settlement batches sent again after a failure or a lost answer (each is applied once)',
    registers,
    collect() {
      this.reset();
      this.inc(stats().settlementRetries);
    },
  });
  new Counter({
    name: 'tollway_settlements_lost_total',
    help: 'Finished requests whose settlement was given up after its retries: usage not charged',
    registers,
    collect() {
      this.reset();
      this.inc(stats().settlementsLost);
    },
  });
  new Counter({
    name: 'tollway_settlements_unreplicated_total',
    help: 'Finished requests whose settlement its replicas did not acknowledge in time (REDIS_WAIT_REPLICAS): a failover then may lose it',
    registers,
    collect() {
      this.reset();
      this.inc(stats().settlementsUnreplicated);
    },
  });
  new Gauge({
    name: 'tollway_capacity_leases_held',
    help: 'Capacity leases this replica holds per model (running requests and reserved block slots)',
    labelNames: ['model'],
    registers,
    collect() {
      this.reset();
      for (const [model, count] of stats().leasesByModel) this.set({ model }, count);
    },
  });
}

/** The memory of prompt token counts (PROMPT_TOKEN_CACHE_ENTRIES), read from the counter at scrape time. */
function registerPromptTokenMetrics(registers: Registry[], stats: () => PromptTokenStats): void {
  new Counter({
    name: 'tollway_prompt_token_cache_lookups_total',
    help: 'Prompt texts looked up in the memory of token counts, by result: hit (counted before) or miss (counted now)',
    labelNames: ['result'],
    registers,
    collect() {
      const { lookups, hits } = stats();
      this.reset();
      this.inc({ result: 'hit' }, hits);
      this.inc({ result: 'miss' }, lookups - hits);
    },
  });
  new Gauge({
    name: 'tollway_prompt_token_cache_entries',
    help: 'Token counts of prompt texts held in memory (at most PROMPT_TOKEN_CACHE_ENTRIES)',
    registers,
    collect() {
      this.set(stats().entries);
    },
  });
}
