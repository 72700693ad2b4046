import type { ChildProcess } from 'node:child_process';
import type { Logger } from '@tollway/service-kit';
import type { AgentInput } from '../agents/agent.types';
import type { StoredMessage } from '../store/session-store';
import type { ChatCallSink, ChildInit, ChildMessage, ParentMessage, TurnEventSink } from './child-protocol';
import { forkNodeFile, siblingFile } from './spawn-node';

/** How a turn run in a child ended. */
export type ChildOutcome =
  | { kind: 'success'; messages: StoredMessage[]; totalTokens: number }
  | { kind: 'failed'; error: string }
  | { kind: 'crashed'; error: string }
  | { kind: 'timeout'; error: string }
  | { kind: 'cancelled' };

/** Options of ChildPool. */
export interface ChildPoolOptions {
  /** Long-lived child processes, one per concurrently running turn. */
  size: number;
  init: Omit<ChildInit, 'type'>;
  logger: Logger;
  /** The child entry file; default `turn-child` beside this file. */
  childFile?: string;
}

/** A turn's tracing and model-call reporting; absent parts are off. */
/** Which turn a child runs: the ids, and the organization its model calls are billed to. */
export interface TurnIdentity {
  turnId: string;
  sessionId: string;
  /** The session's organization (null for a session created without auth). */
  orgId: string | null;
}

export interface TurnTelemetry {
  /** `traceparent` of the turn's invoke_agent span. */
  traceparent?: string;
  /** Receives the turn's chat calls as the child reports them. */
  chatCalls?: ChatCallSink;
  /** Receives the events the turn's agent emits. */
  events?: TurnEventSink;
}

/** An idle child set aside for one turn. */
export interface ChildReservation {
  /** Runs the turn in the reserved child (once). */
  run(turn: TurnIdentity, input: AgentInput, timeoutMs: number, telemetry?: TurnTelemetry): Promise<ChildOutcome>;
  /** Hands the child back unused; a no-op after `run`. */
  release(): void;
}

interface PooledChild {
  process: ChildProcess;
  ready: boolean;
  /** The turn it runs now, if any. */
  turn: {
    turnId: string;
    finish: (outcome: ChildOutcome) => void;
    chatCalls: ChatCallSink | undefined;
    events: TurnEventSink | undefined;
  } | null;
}

/** Delay before re-forking a child that died while starting, so a broken agent module cannot spin. */
const RESPAWN_DELAY_MS = 1000;

/**
 * A pool of long-lived child processes (`child_process.fork`), each running one turn at a time, so
 * a turn can be killed (SIGKILL) without harming the others. A killed or dead child is replaced.
 */
export class ChildPool {
  private readonly children = new Set<PooledChild>();
  private readonly idle: PooledChild[] = [];
  private readonly waiters: ((child: PooledChild | null) => void)[] = [];
  private readonly childFile: string;
  private closed = false;
  private reserving = true;
  private firstReady: { resolve: () => void; reject: (err: Error) => void } | null = null;

  constructor(private readonly options: ChildPoolOptions) {
    this.childFile = options.childFile ?? siblingFile(__dirname, __filename, 'turn-child');
  }

  /** Forks the children; resolves once one is ready, rejects if the agent module cannot be loaded. */
  start(): Promise<void> {
    const ready = new Promise<void>((resolve, reject) => (this.firstReady = { resolve, reject }));
    for (let i = 0; i < this.options.size; i++) this.spawn();
    return ready;
  }

  /**
   * Reserves an idle child for one turn, waiting for one if all are busy; null when `cancel` aborts
   * first. The reservation is used by `run` or handed back with `release`.
   */
  async reserve(cancel: AbortSignal): Promise<ChildReservation | null> {
    if (cancel.aborted || !this.reserving) return null;
    const child = await this.acquire(cancel);
    if (!child) return null;
    let used = false;
    return {
      run: (turn, input, timeoutMs, telemetry) => {
        used = true;
        return this.runOn(child, turn, input, cancel, timeoutMs, telemetry ?? {});
      },
      release: () => {
        if (!used) this.release(child);
        used = true;
      },
    };
  }

  /**
   * Runs one turn in `child`. `cancel` aborting kills the child at once (outcome `cancelled`, any
   * late result discarded); `timeoutMs` > 0 kills it when the turn runs longer.
   */
  private runOn(
    child: PooledChild,
    { turnId, sessionId, orgId }: TurnIdentity,
    input: AgentInput,
    cancel: AbortSignal,
    timeoutMs: number,
    telemetry: TurnTelemetry,
  ): Promise<ChildOutcome> {
    return new Promise<ChildOutcome>((resolve) => {
      let timer: NodeJS.Timeout | undefined;
      const onCancel = () => {
        this.kill(child);
        finish({ kind: 'cancelled' });
      };
      const finish = (outcome: ChildOutcome) => {
        if (child.turn?.turnId !== turnId) return;
        child.turn = null;
        clearTimeout(timer);
        cancel.removeEventListener('abort', onCancel);
        if (outcome.kind === 'success' || outcome.kind === 'failed') this.release(child);
        resolve(outcome);
      };
      if (cancel.aborted) {
        this.release(child);
        return resolve({ kind: 'cancelled' });
      }
      if (!this.children.has(child)) {
        return resolve({ kind: 'crashed', error: 'turn failed: the agent process exited before the turn started' });
      }
      child.turn = { turnId, finish, chatCalls: telemetry.chatCalls, events: telemetry.events };
      cancel.addEventListener('abort', onCancel, { once: true });
      if (timeoutMs > 0) {
        timer = setTimeout(() => {
          this.kill(child);
          finish({ kind: 'timeout', error: `turn timed out after ${timeoutMs} ms` });
        }, timeoutMs);
      }
      const run: ParentMessage = {
        type: 'run',
        turnId,
        sessionId,
        orgId,
        input,
        traceparent: telemetry.traceparent,
        live: telemetry.events?.live ?? false,
      };
      telemetry.events?.onLive(() => {
        if (child.turn?.turnId !== turnId) return;
        const live: ParentMessage = { type: 'live', turnId };
        child.process.send(live, () => undefined);
      });
      const unreachable = (err: Error) => {
        this.kill(child);
        finish({ kind: 'crashed', error: `turn failed: could not reach the agent process (${err.message})` });
      };
      try {
        child.process.send(run, (err) => {
          if (err) unreachable(err);
        });
      } catch (err) {
        // send serialises at once and throws for a message it cannot (a history past V8's
        // largest string): the process would otherwise stay reserved until the turn timeout.
        unreachable(err instanceof Error ? err : new Error(String(err)));
      }
    });
  }

  /** Shutdown: turns waiting for a process get none (reserve answers null); running turns go on. */
  stopReserving(): void {
    this.reserving = false;
    for (const waiter of this.waiters.splice(0)) waiter(null);
  }

  /** Kills every child and stops replacing them. */
  async close(): Promise<void> {
    this.stopReserving();
    this.closed = true;
    const exits = [...this.children].map(
      (child) =>
        new Promise<void>((resolve) =>
          child.process.exitCode !== null || child.process.signalCode !== null
            ? resolve()
            : child.process.once('exit', () => resolve()),
        ),
    );
    for (const child of this.children) child.process.kill('SIGKILL');
    await Promise.all(exits);
  }

  private spawn(): void {
    if (this.closed) return;
    // JSON serialization: every message is JSON already, and it is the faster one for small messages.
    const proc = forkNodeFile(this.childFile, { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
    const child: PooledChild = { process: proc, ready: false, turn: null };
    this.children.add(child);
    proc.on('message', (message: ChildMessage) => this.onMessage(child, message));
    proc.on('error', (err) => this.options.logger.error('agent process error', { pid: proc.pid, err: err.message }));
    proc.once('exit', (code, signal) => this.onExit(child, code, signal));
    proc.send({ type: 'init', ...this.options.init });
  }

  private onMessage(child: PooledChild, message: ChildMessage): void {
    if (message.type === 'ready') {
      child.ready = true;
      this.firstReady?.resolve();
      this.firstReady = null;
      this.release(child);
    } else if (message.type === 'fatal') {
      this.options.logger.error('agent process failed to start', { err: message.error });
      this.firstReady?.reject(new Error(message.error));
      this.firstReady = null;
    } else if (message.type === 'chat-start') {
      const current = child.turn?.turnId === message.turnId ? child.turn : null;
      const traceparent = current?.chatCalls?.started(message);
      if (message.wantsTraceparent) {
        const answer: ParentMessage = { type: 'chat-traceparent', callId: message.callId, traceparent };
        child.process.send(answer, () => undefined);
      }
    } else if (message.type === 'chat-end') {
      if (child.turn?.turnId === message.turnId) child.turn.chatCalls?.ended(message);
    } else if (message.type === 'events') {
      if (child.turn?.turnId === message.turnId && Array.isArray(message.events))
        child.turn.events?.push(message.events);
    } else if (message.type === 'done') {
      child.turn?.finish(
        message.ok
          ? { kind: 'success', messages: message.messages, totalTokens: message.totalTokens }
          : { kind: 'failed', error: message.error },
      );
    }
  }

  private onExit(child: PooledChild, code: number | null, signal: NodeJS.Signals | null): void {
    this.children.delete(child);
    const at = this.idle.indexOf(child);
    if (at !== -1) this.idle.splice(at, 1);
    const how = signal ? `signal ${signal}` : `exit code ${code}`;
    child.turn?.finish({ kind: 'crashed', error: `turn failed: the agent process exited unexpectedly (${how})` });
    if (this.closed) return;
    if (!child.ready) {
      const timer = setTimeout(() => this.spawn(), RESPAWN_DELAY_MS);
      timer.unref();
    } else this.spawn();
  }

  private kill(child: PooledChild): void {
    child.process.kill('SIGKILL');
  }

  private release(child: PooledChild): void {
    if (this.closed || !this.children.has(child)) return;
    const waiter = this.waiters.shift();
    if (waiter) waiter(child);
    else this.idle.push(child);
  }

  private acquire(cancel: AbortSignal): Promise<PooledChild | null> {
    const child = this.idle.pop();
    if (child) return Promise.resolve(child);
    return new Promise((resolve) => {
      const waiter = (found: PooledChild | null) => {
        cancel.removeEventListener('abort', onAbort);
        resolve(found);
      };
      const onAbort = () => {
        const at = this.waiters.indexOf(waiter);
        if (at !== -1) this.waiters.splice(at, 1);
        resolve(null);
      };
      cancel.addEventListener('abort', onAbort, { once: true });
      this.waiters.push(waiter);
    });
  }
}
