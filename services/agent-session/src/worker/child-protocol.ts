import type { AgentInput, AgentSettings, AgentStreamEvent } from '../agents/agent.types';
import type { ChatCallEnd } from '../agents/gateway-client';
import type { StoredMessage } from '../store/session-store';

/** Everything a turn child process needs, sent once right after it is forked. */
export interface ChildInit {
  type: 'init';
  /** Absolute path of the agent module. */
  agentModule: string;
  gatewayBaseUrl: string;
  gatewayApiKey: string;
  gatewayTimeoutMs: number;
  settings: AgentSettings;
  logLevel: string;
}

/** Parent → child: run one turn. */
export interface ChildRun {
  type: 'run';
  turnId: string;
  sessionId: string;
  /**
   * The session's organization: its model calls name it in `x-tollway-organization`, so the
   * gateway bills them to it (null for a session created without auth: the header is left out).
   */
  orgId: string | null;
  input: AgentInput;
  /** `traceparent` of the turn's invoke_agent span, sent on its model calls; absent when tracing is off. */
  traceparent?: string;
  /** The session has readers now (`ctx.events.live`): model calls are worth streaming. */
  live?: boolean;
}

/** Parent → child: the running turn's session got a reader (`ctx.events.live` turns true). */
export interface ChildLive {
  type: 'live';
  turnId: string;
}

/** Parent → child: the `traceparent` of a chat call's span (answer to a `chat-start` asking for it). */
export interface ChildChatTraceparent {
  type: 'chat-traceparent';
  callId: number;
  /** Absent when the call has no span (tracing off, or the turn is no longer current). */
  traceparent?: string;
}

/** Messages the parent sends. */
export type ParentMessage = ChildInit | ChildRun | ChildChatTraceparent | ChildLive;

/**
 * Child → parent: a chat call of the running turn begins. With `wantsTraceparent` (tracing on)
 * the child waits for the `chat-traceparent` answer before sending the request.
 */
export interface ChatStartMessage {
  type: 'chat-start';
  turnId: string;
  /** Unique within the child process. */
  callId: number;
  /** `model` of the request body. */
  model: string;
  wantsTraceparent: boolean;
}

/** Child → parent: a chat call ended, with its usage or its `errorType`, timed in the child. */
export interface ChatEndMessage extends ChatCallEnd {
  type: 'chat-end';
  turnId: string;
  callId: number;
  /** From the request's start to the end of its response body, in seconds. */
  durationSeconds: number;
}

/**
 * The worker's side of a turn's chat calls (the spans and the client metrics); the pool hands it
 * the `chat-start` and `chat-end` messages of the turn it runs.
 */
export interface ChatCallSink {
  /** A call began; returns the `traceparent` of its span (undefined without one). */
  started(message: ChatStartMessage): string | undefined;
  /** A call ended. */
  ended(message: ChatEndMessage): void;
}

/**
 * Child → parent: events the running turn emitted (`ctx.events`), in order, gathered over one turn
 * of the child's event loop. All of a turn's events are sent before its `done`.
 */
export interface ChildEventsMessage {
  type: 'events';
  turnId: string;
  events: AgentStreamEvent[];
}

/** The worker's side of a turn's events (its session's event stream); the pool hands it the turn's `events` messages. */
export interface TurnEventSink {
  push(events: AgentStreamEvent[]): void;
  /** True while the session has readers (the agent streams its model calls then). */
  readonly live: boolean;
  /** Calls `listener` once when `live` turns true (not when it is already). */
  onLive(listener: () => void): void;
}

/** Messages the child sends: ready after loading the agent, a turn's result, or a fatal start-up error. */
export type ChildMessage =
  | { type: 'ready' }
  | ChatStartMessage
  | ChatEndMessage
  | ChildEventsMessage
  | { type: 'fatal'; error: string }
  | { type: 'done'; turnId: string; ok: true; messages: StoredMessage[]; totalTokens: number }
  | { type: 'done'; turnId: string; ok: false; error: string };
