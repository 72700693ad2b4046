import type { AgentTurnJob } from '@tollway/contracts';
import type { Logger } from '@tollway/service-kit';
import { parseTurnJob, toStoredMessage } from '../domain/session-rules';
import type { SessionStore, StoredMessage, TurnOutcome } from '../store/session-store';
import type { ClaimedTurn, FinishResult, TurnScheduler } from '../store/turn-scheduler';
import type { TurnNotifier } from '../webhooks/turn-notifier';
import { traceMetricsOf, TURN_CANCELLED_ERROR, type TurnEnd } from '../webhooks/webhook-payload';
import type { TurnEndEvents } from '../store/event-log-keys';
import type { TurnEventStreams } from '../streaming/turn-event-stream';
import type { ChildOutcome, ChildPool } from './child-pool';
import type { TurnCancellations } from './turn-cancellations';
import type { WorkerRegistration } from './worker-registry';
import type { WorkerMetrics } from '../observability/session-metrics';
import { TurnTrace } from '../observability/turn-trace';
import { TurnChatCalls } from '../observability/chat-calls';
import type { Tracer } from '@opentelemetry/api';

/** What the processor needs. */
export interface AgentTurnProcessorDeps {
  store: SessionStore;
  scheduler: TurnScheduler;
  pool: ChildPool;
  registration: WorkerRegistration;
  cancellations: TurnCancellations;
  notifier: TurnNotifier;
  logger: Logger;
  /** A turn running longer is killed, in ms; 0 = no limit. */
  turnTimeoutMs: number;
  /** Lease lifetime of the turns claimed next, in ms. */
  leaseTtlMs: number;
  clock?: () => number;
  /** Turn counters and durations; null = metrics off. */
  metrics?: WorkerMetrics | null;
  /** The tracer when tracing is on; null = off. */
  tracer?: Tracer | null;
  /** Writes the turns' events to their sessions' event logs; null or absent = off. */
  streams?: TurnEventStreams | null;
}

/**
 * Runs one claimed turn and ends it; `claimNext()` says how many turns to claim in the same step
 * (the worker's free slots then). Resolves with the turns so claimed.
 */
export type AgentTurnProcessor = (turn: ClaimedTurn, claimNext: () => number) => Promise<ClaimedTurn[]>;

/**
 * One agent turn on a worker: the turn was claimed (and leased) by the scheduler; take an agent
 * process, run the agent in it, end the turn compare-and-set while claiming the next, then send the
 * webhook. A failed turn is a session state, never a retry: a turn runs at most once.
 */
export function createAgentTurnProcessor(deps: AgentTurnProcessorDeps): AgentTurnProcessor {
  const clock = deps.clock ?? Date.now;
  return async (claimed, claimNext) => {
    const { sessionId, turnId, orgId } = claimed;
    const logger = deps.logger.child({ session_id: sessionId, turn_id: turnId });
    deps.registration.hold(sessionId, turnId, orgId);
    const cancel = deps.cancellations.track(turnId, sessionId);
    const startedAt = clock();
    const turn = parseTurnJob(claimed.jobJson);
    if (!turn) {
      // Written by the API, so only a hand-edited or corrupted key: the turn fails, nothing runs.
      logger.error('invalid agent-turn job; the turn fails');
      return finishAndReport(deps, claimed, null, { kind: 'error', error: 'turn failed: its job is invalid' }, 0, {
        claimNext,
        traceId: null,
        history: claimed.history,
      });
    }
    deps.metrics?.turnDequeued(Math.max(0, startedAt - turn.accepted_at) / 1000);
    const trace = deps.tracer ? new TurnTrace(deps.tracer, turn) : null;
    const traceId = trace?.traceId ?? null;
    const chatCalls = trace || deps.metrics ? new TurnChatCalls(trace, deps.metrics ?? null) : undefined;
    const ended = (outcome: Parameters<WorkerMetrics['turnEnded']>[0]) => {
      chatCalls?.abandon(outcome === 'succeeded' ? 'abandoned' : outcome);
      deps.metrics?.turnEnded(outcome, (clock() - startedAt) / 1000);
      trace?.end(outcome);
    };
    const events = deps.streams?.open({ sessionId, turnId, orgId }) ?? null;
    try {
      // A running session's history ends with the turn's own message: an empty one was deleted
      // between the claim and its read (its cancellation may not have arrived yet).
      const child = claimed.history.length > 0 ? await deps.pool.reserve(cancel) : null;
      if (!child && !cancel.aborted && claimed.history.length > 0) {
        // The worker is shutting down before the turn started: back to the front of its queue.
        trace?.end('requeued');
        await deps.scheduler.requeue(claimed).finally(() => deps.registration.forget(sessionId, turnId, orgId));
        return [];
      }
      let outcome: ChildOutcome = { kind: 'cancelled' };
      if (child) {
        deps.metrics?.turnStarted();
        events?.begin(claimed.watched);
        outcome = await child.run(
          { turnId, sessionId, orgId: turn.org_id },
          {
            history: claimed.history.slice(0, -1),
            message: claimed.history.at(-1) ?? toStoredMessage(turn.message),
            userParams: turn.message.user_params,
          },
          deps.turnTimeoutMs,
          { traceparent: trace?.agentStarts(sessionId), chatCalls, events: events ?? undefined },
        );
      }
      if (outcome.kind === 'cancelled') {
        logger.info('turn cancelled; agent process killed');
        ended('cancelled');
        // Ended as a cancelled turn: its session was deleted (the end is stale), or a reaper took its
        // lease (this worker seemed gone) and ended it and sent its webhook.
        return await finishAndReport(deps, claimed, turn, { kind: 'error', error: TURN_CANCELLED_ERROR }, 0, {
          claimNext,
          traceId,
          history: claimed.history,
          startedAt,
        });
      }
      ended(outcome.kind === 'success' ? 'succeeded' : outcome.kind === 'timeout' ? 'timed_out' : 'failed');
      const totalTokens = outcome.kind === 'success' ? outcome.totalTokens : 0;
      const end = toTurnOutcome(outcome);
      // What the turn's events had not written goes with the script that ends it, and its ending
      // event carries the trace_metrics of its webhook.
      const durationMs = clock() - startedAt;
      const tail = await events?.finishing(
        JSON.stringify(traceMetricsOf({ end: toTurnEnd(end), durationMs, totalTokens, traceId })),
      );
      return await finishAndReport(deps, claimed, turn, end, totalTokens, {
        claimNext,
        traceId,
        history: claimed.history,
        startedAt,
        events: tail,
      });
    } catch (err) {
      chatCalls?.abandon('failed');
      trace?.end('failed');
      throw err;
    } finally {
      events?.close();
      deps.cancellations.untrack(turnId);
    }
  };
}

/**
 * Ends the turn (claiming the next in the same step), then tells its webhook: the outcome when the
 * end applied; a cancellation when the session was deleted meanwhile and this worker still held the
 * turn (a reaper that took its lease sent the turn's webhook itself).
 */
async function finishAndReport(
  deps: AgentTurnProcessorDeps,
  claimed: ClaimedTurn,
  turn: AgentTurnJob | null,
  end: TurnOutcome,
  totalTokens: number,
  context: {
    claimNext: () => number;
    traceId: string | null;
    history: StoredMessage[];
    startedAt?: number;
    /** What the turn's event log gets with its end. */
    events?: TurnEndEvents;
  },
): Promise<ClaimedTurn[]> {
  const clock = deps.clock ?? Date.now;
  const { result, stillLeased, next } = await endTurn(deps, claimed, end, context.claimNext, context.events);
  const durationMs = clock() - (context.startedAt ?? clock());
  const logger = deps.logger.child({ session_id: claimed.sessionId, turn_id: claimed.turnId });
  if (!turn) return next;
  if (result === 'applied') {
    if (end.kind === 'error') logger.warn('turn failed', { error: end.error });
    const after = end.kind === 'success' ? [...context.history, ...end.append] : context.history;
    deps.notifier.notify(turn, {
      sessionId: claimed.sessionId,
      end: toTurnEnd(end),
      history: after,
      durationMs,
      totalTokens,
      traceId: context.traceId,
    });
    return next;
  }
  logger.info('turn result discarded: the turn is no longer current');
  if (stillLeased) await reportCancelled(deps, turn, context.history, durationMs, context.traceId);
  return next;
}

/** Waits between tries of ending a turn while Redis does not answer, ms (the last one repeats). */
const END_RETRY_DELAYS_MS = [100, 250, 500, 1000, 2000];
/**
 * How long a worker keeps trying to end a turn whose outcome it has, ms: past any Redis outage a
 * deployment rides out. Meanwhile its heartbeat keeps the turn's lease, so no reaper takes it
 * once Redis is back; the answer a turn paid for is not thrown away for an outage.
 */
export const END_TURN_RETRY_FOR_MS = 120_000;

/**
 * Ends the turn and releases its lease in one step (claiming the next turns with it), tried again
 * while Redis does not answer (without claiming then: a claim whose reply was lost would strand its
 * turns until their leases lapse). A try whose reply was lost may have run: a later try then finds
 * the turn ended and the lease gone, and asks the session who ended the turn, so its own ending is
 * still reported as applied.
 */
async function endTurn(
  deps: AgentTurnProcessorDeps,
  claimed: ClaimedTurn,
  end: TurnOutcome,
  claimNext: () => number,
  events?: TurnEndEvents,
): Promise<FinishResult> {
  const clock = deps.clock ?? Date.now;
  const { sessionId, turnId, orgId } = claimed;
  const startedAt = clock();
  try {
    for (let attempt = 0; ; attempt++) {
      try {
        if (attempt === 0) return await deps.scheduler.finish(claimed, end, claimNext(), deps.leaseTtlMs, events);
        const { result, released } = await deps.store.endTurn(sessionId, turnId, end, { org: orgId, events });
        if (result === 'stale' && (await deps.store.endedBy(sessionId, turnId)) === 'worker') {
          return { result: 'applied', stillLeased: false, next: [] };
        }
        return { result, stillLeased: released, next: [] };
      } catch (err) {
        if (clock() - startedAt >= END_TURN_RETRY_FOR_MS) throw err;
        if (attempt === 0) {
          deps.logger.warn('ending the turn failed; trying again', {
            session_id: sessionId,
            turn_id: turnId,
            err: (err as Error).message,
          });
        }
        await sleep(END_RETRY_DELAYS_MS[Math.min(attempt, END_RETRY_DELAYS_MS.length - 1)] as number);
      }
    }
  } finally {
    // Ended, or given up on (left to expire: a reaper ends the turn if nothing else did).
    deps.registration.forget(sessionId, turnId, orgId);
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/**
 * Sends the turn's `turn cancelled: session deleted` webhook, unless a reaper (or the API) ended
 * the turn first: it sent the turn's one webhook, and a deletion after it cancelled nothing.
 */
async function reportCancelled(
  deps: AgentTurnProcessorDeps,
  turn: AgentTurnJob,
  history: StoredMessage[] | null,
  durationMs: number,
  traceId: string | null,
): Promise<void> {
  if ((await deps.store.endedBy(turn.session_id, turn.turn_id).catch(() => null)) !== null) return;
  deps.notifier.notifyCancelled(turn, { history, durationMs, traceId });
}

/** A child's outcome as the store's turn outcome; response = the last assistant message appended. */
export function toTurnOutcome(outcome: Exclude<ChildOutcome, { kind: 'cancelled' }>): TurnOutcome {
  if (outcome.kind !== 'success') return { kind: 'error', error: outcome.error };
  const last = [...outcome.messages].reverse().find((message) => message.role === 'assistant');
  if (!last) return { kind: 'error', error: 'the agent returned no assistant message' };
  return { kind: 'success', append: outcome.messages, response: { role: 'assistant', content: last.content ?? null } };
}

function toTurnEnd(outcome: TurnOutcome): TurnEnd {
  return outcome.kind === 'success' ? { kind: 'success', response: outcome.response } : outcome;
}
