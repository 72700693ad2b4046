import { UnrecoverableError, WaitingError, type Job } from 'bullmq';
import { AgentTurnJob } from '@tollway/contracts';
import { toStoredMessage } from '../domain/session-rules';
import type { Logger } from '@tollway/service-kit';
import type { SessionStore, StoredMessage, TurnOutcome } from '../store/session-store';
import type { TurnNotifier } from '../webhooks/turn-notifier';
import { traceMetricsOf, TURN_CANCELLED_ERROR, type TurnEnd } from '../webhooks/webhook-payload';
import type { TurnEndEvents } from '../store/event-log-keys';
import type { TurnEventStreams } from '../streaming/turn-event-stream';
import type { ChildOutcome, ChildPool, ChildReservation } from './child-pool';
import type { TurnCancellations } from './turn-cancellations';
import type { WorkerRegistration } from './worker-registry';
import type { WorkerMetrics } from '../observability/session-metrics';
import { TurnTrace } from '../observability/turn-trace';
import { TurnChatCalls } from '../observability/chat-calls';
import type { Tracer } from '@opentelemetry/api';

/** What the processor needs. */
export interface AgentTurnProcessorDeps {
  store: SessionStore;
  pool: ChildPool;
  registration: WorkerRegistration;
  cancellations: TurnCancellations;
  notifier: TurnNotifier;
  logger: Logger;
  /** A turn running longer is killed, in ms; 0 = no limit. */
  turnTimeoutMs: number;
  clock?: () => number;
  /** Turn counters and durations; null = metrics off. */
  metrics?: WorkerMetrics | null;
  /** The tracer when tracing is on; null = off. */
  tracer?: Tracer | null;
  /** Writes the turns' events to their sessions' event logs; null or absent = off. */
  streams?: TurnEventStreams | null;
}

/**
 * The BullMQ processor of one agent turn: load its context, take an agent process and the turn's
 * lease, run the agent in that child process, end the turn compare-and-set, then send the webhook. It never throws for a turn
 * that ran (a failed turn is a session state, not a job retry); an invalid payload is unrecoverable.
 */
export function createAgentTurnProcessor(deps: AgentTurnProcessorDeps): (job: Job, token?: string) => Promise<void> {
  const clock = deps.clock ?? Date.now;
  return async (job, token) => {
    const parsed = AgentTurnJob.safeParse(job.data);
    if (!parsed.success) {
      throw new UnrecoverableError(`invalid agent-turn job: ${parsed.error.issues[0]?.message ?? 'bad payload'}`);
    }
    const turn = parsed.data;
    const { session_id: sessionId, turn_id: turnId } = turn;
    const logger = deps.logger.child({ session_id: sessionId, turn_id: turnId });
    const cancel = deps.cancellations.track(turnId, sessionId);
    const startedAt = clock();
    const trace = deps.tracer ? new TurnTrace(deps.tracer, turn) : null;
    const traceId = trace?.traceId ?? null;
    const chatCalls = trace || deps.metrics ? new TurnChatCalls(trace, deps.metrics ?? null) : undefined;
    const ended = (outcome: Parameters<WorkerMetrics['turnEnded']>[0]) => {
      chatCalls?.abandon(outcome === 'succeeded' ? 'abandoned' : outcome);
      deps.metrics?.turnEnded(outcome, (clock() - startedAt) / 1000);
      trace?.end(outcome);
    };
    let lease: Promise<boolean> | null = null;
    let child: ChildReservation | null = null;
    const events = deps.streams?.open({ sessionId, turnId, orgId: turn.org_id }) ?? null;
    try {
      // Read while the job may still wait for a free agent process: a running turn's history cannot
      // change (sends are refused), and a deletion aborts `cancel`.
      const found = await deps.store.getTurnContext(sessionId, turnId);
      const readAt = clock();
      if (found && 'ended' in found) {
        // A reaper ended it while this job waited (its worker seemed gone: paused, partitioned)
        // and sent the turn's webhook: nothing to run, nothing more to tell.
        logger.info('turn already ended; its job is dropped');
        trace?.end('cancelled');
        return;
      }
      const context = found;
      if (!context || cancel.aborted) {
        // Deleted before the turn started (a lost turn is reaped, never left for a later start).
        ended('cancelled');
        await reportCancelled(deps, turn, context?.history ?? null, clock() - startedAt, traceId);
        return;
      }
      child = await deps.pool.reserve(cancel);
      if (child && !cancel.aborted && clock() - readAt >= CONTEXT_RECHECK_AFTER_MS) {
        // The job waited for an agent process (or the worker was paused) since its context was
        // read: a reaper may have ended the turn meanwhile and sent its webhook. Running it then
        // would bill a turn whose result is discarded and report it as a deleted session's.
        const state = await deps.store.turnState(sessionId, turnId);
        if (state === 'ended') {
          logger.info('turn already ended; its job is dropped');
          trace?.end('cancelled');
          return;
        }
        if (state === 'gone') {
          ended('cancelled');
          await reportCancelled(deps, turn, context.history, clock() - startedAt, traceId);
          return;
        }
      }
      if (!child && !cancel.aborted) {
        // The worker is shutting down before the turn started: hand the job back to the queue.
        trace?.end('requeued');
        await job.moveToWait(token);
        throw new WaitingError();
      }
      if (!child) {
        ended('cancelled');
        await reportCancelled(deps, turn, context.history, clock() - startedAt, traceId);
        return;
      }
      deps.metrics?.turnStarted();
      // Leased once it has a process, so a leased turn (what /health counts) is executing. The lease
      // write goes out with the run, not before it; a worker dying in between leaves an active job
      // without a lease, which the reaper recognises by its lapsed job lock.
      lease = deps.registration.acquireLease(sessionId, turnId, JSON.stringify(turn)).then(
        () => true,
        (err: unknown) => {
          logger.warn('turn lease not taken', { err: (err as Error).message });
          return false;
        },
      );
      const history = context.history.slice(0, -1);
      const message = context.history.at(-1) ?? toStoredMessage(turn.message);
      events?.begin();
      const outcome = await child.run(
        { turnId, sessionId, orgId: turn.org_id },
        { history, message, userParams: turn.message.user_params },
        deps.turnTimeoutMs,
        { traceparent: trace?.agentStarts(sessionId), chatCalls, events: events ?? undefined },
      );
      if (outcome.kind === 'cancelled') {
        logger.info('turn cancelled; agent process killed');
        ended('cancelled');
        const leased = await lease;
        lease = null;
        // Reported only while the lease is still this worker's: a reaper that claimed it (this
        // worker seemed gone) reports the deleted session's turn itself.
        const stillLeased = await deps.registration.releaseLease(sessionId, turnId).catch(() => {
          deps.registration.forgetLease(sessionId, turnId);
          return true;
        });
        if (stillLeased || !leased) await reportCancelled(deps, turn, context.history, clock() - startedAt, traceId);
        return;
      }
      ended(outcome.kind === 'success' ? 'succeeded' : outcome.kind === 'timeout' ? 'timed_out' : 'failed');
      const end = toTurnOutcome(outcome);
      const durationMs = clock() - startedAt;
      const totalTokens = outcome.kind === 'success' ? outcome.totalTokens : 0;
      const tail = await events?.finishing(
        JSON.stringify(traceMetricsOf({ end: toTurnEnd(end), durationMs, totalTokens, traceId })),
      );
      await lease;
      lease = null;
      const [result, stillLeased] = await endTurn(deps, sessionId, turnId, end, logger, tail);
      if (result === 'applied') {
        if (end.kind === 'error') logger.warn('turn failed', { error: end.error });
        const after = end.kind === 'success' ? [...context.history, ...end.append] : context.history;
        deps.notifier.notify(turn, {
          sessionId,
          end: toTurnEnd(end),
          history: after,
          durationMs,
          totalTokens,
          traceId,
        });
        return;
      }
      // Stale: the session was deleted while the turn ended, or a reaper already ended it (and
      // sent its webhook): one that claimed the lease, or one that ended the turn before this
      // worker leased it (recorded as the turn's ender, which reportCancelled asks).
      logger.info('turn result discarded: the turn is no longer current');
      if (stillLeased) await reportCancelled(deps, turn, context.history, durationMs, traceId);
    } catch (err) {
      if (!(err instanceof WaitingError)) {
        chatCalls?.abandon('failed');
        trace?.end('failed');
      }
      throw err;
    } finally {
      events?.close();
      child?.release();
      deps.cancellations.untrack(turnId);
      if (lease && (await lease)) {
        await deps.registration.releaseLease(sessionId, turnId).catch((err: unknown) => {
          // Left to expire: a reaper ends the turn if nothing else did.
          deps.registration.forgetLease(sessionId, turnId);
          throw err;
        });
      }
    }
  };
}

/**
 * A turn whose context was read this long before it got an agent process is checked again before
 * it runs, ms: far below any lease or job lock a reaper waits out, above a free process's reserve.
 */
const CONTEXT_RECHECK_AFTER_MS = 250;

/** Waits between tries of ending a turn while Redis does not answer, ms (the last one repeats). */
const END_RETRY_DELAYS_MS = [100, 250, 500, 1000, 2000];
/**
 * How long a worker keeps trying to end a turn whose outcome it has, ms: past any Redis outage a
 * deployment rides out. Meanwhile its heartbeat keeps the turn's lease, so no reaper takes it
 * once Redis is back; the answer a turn paid for is not thrown away for an outage.
 */
export const END_TURN_RETRY_FOR_MS = 120_000;

/**
 * Ends the turn and releases its lease in one pipelined round trip: Redis runs them in order, so
 * the turn is ended before its lease goes, and a lease already gone means a reaper claimed (and
 * ended) the turn first. Tried again while Redis does not answer. A try whose reply was lost may
 * have run: a later try then finds the turn ended and the lease gone, and asks the session who
 * ended the turn, so its own ending is still reported as applied.
 */
async function endTurn(
  deps: AgentTurnProcessorDeps,
  sessionId: string,
  turnId: string,
  end: TurnOutcome,
  logger: Logger,
  events?: TurnEndEvents,
): Promise<['applied' | 'stale', boolean]> {
  const clock = deps.clock ?? Date.now;
  const startedAt = clock();
  let unanswered = false;
  for (let attempt = 0; ; attempt++) {
    try {
      const [result, stillLeased] = await Promise.all([
        deps.store.finishTurn(sessionId, turnId, end, 'worker', events),
        deps.registration.releaseLease(sessionId, turnId),
      ]);
      if (result === 'stale' && unanswered && (await deps.store.endedBy(sessionId, turnId)) === 'worker') {
        return ['applied', false];
      }
      return [result, stillLeased];
    } catch (err) {
      if (clock() - startedAt >= END_TURN_RETRY_FOR_MS) throw err;
      unanswered = true;
      if (attempt === 0) logger.warn('ending the turn failed; trying again', { err: (err as Error).message });
      await sleep(END_RETRY_DELAYS_MS[Math.min(attempt, END_RETRY_DELAYS_MS.length - 1)] as number);
    }
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
  deps.notifier.notify(turn, {
    sessionId: turn.session_id,
    end: { kind: 'error', error: TURN_CANCELLED_ERROR },
    history,
    durationMs,
    totalTokens: 0,
    traceId,
  });
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
