import { pathToFileURL } from 'node:url';
import { createLogger, type Logger } from '@tollway/service-kit';
import { resolveAgentExport, type Agent, type AgentContext } from '../agents/agent.types';
import { createGatewayClient } from '../agents/gateway-client';
import type { ChildInit, ChildMessage, ChildRun, ParentMessage } from './child-protocol';

/**
 * Entry point of a turn child process: loads the agent once, then runs the turns its parent sends,
 * one at a time. The parent kills it with SIGKILL to cancel a turn; if the parent dies (the IPC
 * channel closes) the child exits at once, so an orphaned turn makes no further model calls.
 */

let agent: Agent | null = null;
let base: Omit<AgentContext, 'logger' | 'signal'> | null = null;
let logger: Logger | null = null;
const turnAborts = new Set<AbortController>();

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
  const turnLogger = logger.child({ session_id: message.sessionId, turn_id: message.turnId });
  try {
    const result = await agent(message.input, { ...base, logger: turnLogger, signal: abort.signal });
    if (!result || !Array.isArray(result.messages)) throw new Error('the agent returned no messages array');
    // Checked here, where a failure is the turn's error: a result IPC cannot carry (a cycle, a
    // BigInt) would otherwise throw from send() outside the turn and end this process.
    JSON.stringify(result.messages);
    send({
      type: 'done',
      turnId: message.turnId,
      ok: true,
      messages: result.messages,
      totalTokens: Number(result.usage?.total_tokens ?? 0) || 0,
    });
  } catch (err) {
    send({ type: 'done', turnId: message.turnId, ok: false, error: err instanceof Error ? err.message : String(err) });
  } finally {
    turnAborts.delete(abort);
  }
}

process.on('message', (message: ParentMessage) => {
  if (message.type === 'init') void init(message);
  else if (message.type === 'run') void run(message);
});

process.on('disconnect', exitOrphaned);
