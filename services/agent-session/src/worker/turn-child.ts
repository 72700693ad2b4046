import { pathToFileURL } from 'node:url';
import { createLogger, type Logger } from '@tollway/service-kit';
import { resolveAgentExport, type Agent, type AgentContext } from '../agents/agent.types';
import { AgentEventEmitter } from '../agents/agent-events';
import { createGatewayClient, type ChatCallObserver } from '../agents/gateway-client';
import type { ChildInit, ChildMessage, ChildRun, ParentMessage } from './child-protocol';

/**
 * Entry point of a turn child process: loads the agent once, then runs the turns its parent sends,
 * one at a time. The parent kills it with SIGKILL to cancel a turn; if the parent dies (the IPC
 * channel closes) the child exits at once, so an orphaned turn makes no further model calls.
 */

let agent: Agent | null = null;
let base: Omit<AgentContext, 'logger' | 'signal' | 'events' | 'sessionId'> | null = null;
let logger: Logger | null = null;
const turnAborts = new Set<AbortController>();
/** The turn running now (one at a time per child). */
let turnId: string | undefined;
/** The running turn's `ctx.events`. */
let turnEvents: AgentEventEmitter | undefined;
/** `traceparent` of the turn's invoke_agent span, put on its model calls; absent when tracing is off. */
let turnTraceparent: string | undefined;
/** The running turn's session's organization, named on its model calls; absent without auth. */
let turnOrganization: string | undefined;
let lastCallId = 0;
/** Chat calls waiting for their span's `traceparent` from the parent, by call id. */
const awaitingTraceparent = new Map<number, (traceparent: string | undefined) => void>();

/**
 * The chat calls of a turn are reported to the parent, which owns their spans and the client
 * metrics: it outlives this process (killed by SIGKILL on a cancel or a timeout, its buffered
 * spans would be lost, and the gateway's span would point at a parent that never arrives), it
 * already holds the turn's invoke_agent span, and it serves /metrics. With tracing on, a call
 * waits one IPC round trip (well under a millisecond) for its span's `traceparent`.
 */
const chatCalls: ChatCallObserver = {
  async start(model) {
    const callId = ++lastCallId;
    const callTurnId = turnId ?? '';
    const wantsTraceparent = turnTraceparent !== undefined;
    const startedAt = performance.now();
    const answered = wantsTraceparent
      ? new Promise<string | undefined>((resolve) => awaitingTraceparent.set(callId, resolve))
      : Promise.resolve(undefined);
    send({ type: 'chat-start', turnId: callTurnId, callId, model, wantsTraceparent });
    const traceparent = await answered;
    let ended = false;
    return {
      traceparent,
      end(outcome) {
        if (ended) return;
        ended = true;
        const durationSeconds = (performance.now() - startedAt) / 1000;
        send({ type: 'chat-end', turnId: callTurnId, callId, durationSeconds, ...outcome });
      },
    };
  },
};

/** The parent is gone (IPC closed): stop, so an orphaned turn makes no further model calls. */
function exitOrphaned(): never {
  for (const abort of turnAborts) abort.abort(new Error('worker process gone'));
  process.exit(1);
}

/**
 * Sends to the parent. A write to a parent that just died fails with EPIPE; with a callback the
 * failure comes here instead of as an uncaught 'error' event, and the child exits quietly.
 */
function send(message: ChildMessage): void {
  if (!process.connected) exitOrphaned();
  process.send?.(message, (err: Error | null) => {
    if (err) exitOrphaned();
  });
}

async function init(message: ChildInit): Promise<void> {
  logger = createLogger({ service: 'agent-session-turn', level: message.logLevel });
  try {
    const mod: unknown = await import(pathToFileURL(message.agentModule).href);
    agent = resolveAgentExport(mod, message.agentModule);
  } catch (err) {
    const error = `cannot load agent module: ${err instanceof Error ? err.message : String(err)}`;
    // Exit once the message is flushed to the parent, not before.
    process.send?.({ type: 'fatal', error } satisfies ChildMessage, () => process.exit(1));
    return;
  }
  base = {
    openai: createGatewayClient({
      baseURL: message.gatewayBaseUrl,
      apiKey: message.gatewayApiKey,
      timeoutMs: message.gatewayTimeoutMs,
      traceparent: () => turnTraceparent,
      organization: () => turnOrganization,
      chatCalls,
    }),
    settings: message.settings,
  };
  send({ type: 'ready' });
}

async function run(message: ChildRun): Promise<void> {
  if (!agent || !base || !logger) {
    send({ type: 'done', turnId: message.turnId, ok: false, error: 'agent process not initialised' });
    return;
  }
  const abort = new AbortController();
  turnAborts.add(abort);
  turnId = message.turnId;
  turnTraceparent = message.traceparent;
  turnOrganization = message.orgId ?? undefined;
  const turnLogger = logger.child({ session_id: message.sessionId, turn_id: message.turnId });
  const events = new AgentEventEmitter(
    (batch) => send({ type: 'events', turnId: message.turnId, events: batch }),
    message.live === true,
  );
  turnEvents = events;
  try {
    const result = await agent(message.input, {
      ...base,
      sessionId: message.sessionId,
      logger: turnLogger,
      signal: abort.signal,
      events,
    });
    if (!result || !Array.isArray(result.messages)) throw new Error('the agent returned no messages array');
    // Checked here, where a failure is the turn's error: a result IPC cannot carry (a cycle, a
    // BigInt) would otherwise throw from send() outside the turn and end this process.
    JSON.stringify(result.messages);
    events.flush();
    send({
      type: 'done',
      turnId: message.turnId,
      ok: true,
      messages: result.messages,
      totalTokens: Number(result.usage?.total_tokens ?? 0) || 0,
    });
  } catch (err) {
    events.flush();
    send({ type: 'done', turnId: message.turnId, ok: false, error: err instanceof Error ? err.message : String(err) });
  } finally {
    turnId = undefined;
    turnEvents = undefined;
    turnTraceparent = undefined;
    turnOrganization = undefined;
    turnAborts.delete(abort);
  }
}

process.on('message', (message: ParentMessage) => {
  if (message.type === 'init') void init(message);
  else if (message.type === 'run') void run(message);
  else if (message.type === 'live') {
    if (message.turnId === turnId) turnEvents?.goLive();
  } else if (message.type === 'chat-traceparent') {
    awaitingTraceparent.get(message.callId)?.(message.traceparent);
    awaitingTraceparent.delete(message.callId);
  }
});

process.on('disconnect', exitOrphaned);
