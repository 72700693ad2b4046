import type { AgentInput, AgentSettings } from '../agents/agent.types';
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
  input: AgentInput;
  /** `traceparent` of the turn's invoke_agent span, sent on its model calls; absent when tracing is off. */
  traceparent?: string;
}

/** Messages the parent sends. */
export type ParentMessage = ChildInit | ChildRun;

/** Messages the child sends: ready after loading the agent, a turn's result, or a fatal start-up error. */
export type ChildMessage =
  | { type: 'ready' }
  | { type: 'fatal'; error: string }
  | { type: 'done'; turnId: string; ok: true; messages: StoredMessage[]; totalTokens: number }
  | { type: 'done'; turnId: string; ok: false; error: string };
