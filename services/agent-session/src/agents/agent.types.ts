import type OpenAI from 'openai';
import type { AgentCustomEvent, MessageDeltaEvent, ToolCallDeltaEvent, ToolResultEvent } from '@tollway/contracts';
import type { Logger } from '@tollway/service-kit';
import type { StoredMessage } from '../store/session-store';

/**
 * The agent interface. An agent module (`AGENT_MODULE`, default the built-in chat agent) exports one
 * function, as its default export or as a named export `agent`:
 *
 *   export default async function agent(input: AgentInput, ctx: AgentContext): Promise<AgentResult>
 *
 * It runs inside a worker child process, one turn at a time. It receives the session history (every
 * message before this turn), the new message and the message's `user_params`, and returns the messages
 * to append after the new message (assistant replies, tool calls, tool results). The last assistant
 * message it returns becomes the session's `response`. Throwing ends the turn in `error` with the
 * exception's message, and nothing it would have returned is appended. It must honour `ctx.signal`
 * (the turn was cancelled or timed out); the worker also kills the process shortly after.
 */
export type Agent = (input: AgentInput, ctx: AgentContext) => Promise<AgentResult>;

/** What an agent is given about the turn. */
export interface AgentInput {
  /** The conversation so far, oldest first, without the new message. */
  history: StoredMessage[];
  /** The message sent by this turn (already stored in the history by the API). */
  message: StoredMessage;
  /** `user_params` of the send-message body; null when absent. */
  userParams: Record<string, unknown> | null;
}

/** Settings of the worker an agent may follow. */
export interface AgentSettings {
  /** Model used when `user_params.model` is absent (`AGENT_DEFAULT_MODEL`). */
  defaultModel: string;
  /** Most tries of one model call, first try included (`AGENT_MAX_MODEL_TRIES`). */
  maxModelTries: number;
  /** First back-off delay between tries, in ms, before jitter. */
  retryBaseDelayMs: number;
  /** Longest back-off delay between tries, in ms. */
  retryMaxDelayMs: number;
}

/** Services the worker hands an agent for one turn. */
export interface AgentContext {
  /** An `openai` client pointed at the inference gateway, with SDK retries off (see `callModel`). */
  openai: OpenAI;
  /** A logger whose records carry the session and turn ids. */
  logger: Logger;
  /** Aborted when the turn is cancelled (session deleted) or times out. */
  signal: AbortSignal;
  settings: AgentSettings;
  /**
   * The session's id. The default agent sends it as the request's `user`, so a gateway routing a
   * model by `sticky` or `prefix_cache` keeps the session's turns on the replica that holds its KV cache.
   */
  sessionId: string;
  /**
   * The turn's events, as readers of `GET /sessions/{id}/events` see them: what the agent writes
   * as it writes it, and events of its own. `streamModel` forwards a model call's deltas here.
   */
  events: AgentEvents;
}

/**
 * How an agent tells readers of its session what it does while the turn runs. Calls are cheap
 * and never wait: the worker batches the events, and writes them only while the session has
 * readers (a reader that comes mid-turn gets the text written so far in its first delta).
 */
export interface AgentEvents {
  /**
   * True while the session has readers (from the turn's start, or since one came): a model call
   * made now is worth streaming. `streamModel` asks it: with no one reading, a call is made whole
   * (cheaper for the gateway and the worker), and its answer is forwarded as one delta, which is
   * what a reader who comes later would read first anyway.
   */
  readonly live: boolean;
  /**
   * Starts the turn's next assistant message and returns its index (0 for the first); later
   * deltas belong to it. Call it once per model call whose output you forward.
   */
  startMessage(): number;
  /** Text of the current assistant message as it is written (`message.delta`). */
  delta(delta: { content?: string; reasoning_content?: string }): void;
  /** A tool call of the current message as the model forms it (`tool_call.delta`). */
  toolCallDelta(delta: { index: number; id?: string; name?: string; arguments?: string }): void;
  /** The result of a tool call the agent ran itself (`tool.result`). */
  toolResult(result: { tool_call_id: string; content: string | null }): void;
  /**
   * An event of the agent's own (`agent.event`): `name` of 1–128 characters, `data` any JSON value
   * of at most 64 KiB. Throws a TypeError otherwise.
   */
  emit(name: string, data?: unknown): void;
}

type WithoutTurn<T> = T extends unknown ? Omit<T, 'session_id' | 'turn_id'> : never;

/** An event of a turn as its agent process reports it; the worker adds the session and turn ids. */
export type AgentStreamEvent = WithoutTurn<MessageDeltaEvent | ToolCallDeltaEvent | ToolResultEvent | AgentCustomEvent>;

/** What an agent returns. */
export interface AgentResult {
  /** Messages appended to the history after the new message, in order. */
  messages: StoredMessage[];
  /** Tokens consumed by every model call of the turn, reported in `trace_metrics.total_tokens`. */
  usage?: { total_tokens: number };
}

/** Finds the agent function of a loaded module (default export, CommonJS interop, or `agent`); throws otherwise. */
export function resolveAgentExport(mod: unknown, modulePath: string): Agent {
  const candidates: unknown[] = [];
  if (typeof mod === 'function') candidates.push(mod);
  if (mod !== null && typeof mod === 'object') {
    const record = mod as Record<string, unknown>;
    candidates.push(record.default, record.agent);
    const inner = record.default;
    if (inner !== null && typeof inner === 'object') {
      candidates.push((inner as Record<string, unknown>).default, (inner as Record<string, unknown>).agent);
    }
  }
  const found = candidates.find((candidate) => typeof candidate === 'function');
  if (!found) throw new Error(`agent module ${modulePath} exports no agent function (default export or "agent")`);
  return found as Agent;
}
