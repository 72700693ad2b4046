import type { ServerResponse } from 'node:http';
import { readSseFrames, SessionEvent, type SseFrame } from '@tollway/contracts';
import type { OrgAuthenticator } from '../../src/api/auth';
import type { RunningWorker } from '../../src/worker/start-worker';
import { deleteKeys, serve, startReplica, testPrefix, type ApiReplica, type ReplicaOptions } from '../api/api-harness';
import { startTestServer, startTestWorker, type Received, type TestServer } from '../worker/worker-harness';

/** One API replica serving the event streams, listening. */
export interface ServedReplica {
  replica: ApiReplica;
  url: string;
}

/**
 * API replicas serving event streams on one prefix, one worker running the default chat agent,
 * and the agent's fake gateway, whose answer each test sets (`platform.reply`).
 */
export interface StreamPlatform {
  prefix: string;
  replicas: ServedReplica[];
  worker: RunningWorker;
  gateway: TestServer;
  /** How the fake gateway answers a chat request. */
  reply: (request: Received, res: ServerResponse) => void;
  /** Creates a session through replica 0 (as `key`'s organization) and returns its id. */
  createSession(key?: string): Promise<string>;
  close(): Promise<void>;
}

/** Two organizations' keys, for platforms started with `orgAuthenticator`. */
export const KEYS = { a: 'key-org-a', b: 'key-org-b' } as const;

/** An authenticator that knows KEYS.a (org_a) and KEYS.b (org_b). */
export const orgAuthenticator: OrgAuthenticator = {
  authenticate: async (token) => (token === KEYS.a ? { orgId: 'org_a' } : token === KEYS.b ? { orgId: 'org_b' } : null),
};

export async function startStreamPlatform(
  options: {
    replicas?: number;
    workerEnv?: Record<string, string>;
    replicaOptions?: Omit<ReplicaOptions, 'events'>;
    events?: ReplicaOptions['events'];
  } = {},
): Promise<StreamPlatform> {
  const prefix = testPrefix();
  const replicas: ServedReplica[] = [];
  const servers: Array<{ close(): Promise<void> }> = [];
  for (let i = 0; i < (options.replicas ?? 1); i++) {
    const replica = await startReplica(prefix, { ...options.replicaOptions, events: options.events ?? {} });
    const server = await serve(replica.app);
    servers.push(server);
    replicas.push({ replica, url: server.url });
  }
  const platform = {} as StreamPlatform;
  const gateway = await startTestServer((request, res) => platform.reply(request, res));
  const worker = await startTestWorker(prefix, { GATEWAY_BASE_URL: `${gateway.url}/v1`, ...options.workerEnv });
  Object.assign(platform, {
    prefix,
    replicas,
    worker,
    gateway,
    reply: (_request: Received, res: ServerResponse) => res.writeHead(500).end(),
    async createSession(key?: string) {
      const created = await fetch(`${replicas[0]!.url}/sessions`, { method: 'POST', headers: auth(key) });
      return ((await created.json()) as { session_id: string }).session_id;
    },
    async close() {
      await worker.close();
      await gateway.close();
      for (const server of servers) await server.close();
      for (const { replica } of replicas) await replica.close();
      await deleteKeys(prefix);
    },
  });
  return platform;
}

/** The Authorization header of `key`, none without one. */
export function auth(key?: string): Record<string, string> {
  return key ? { authorization: `Bearer ${key}` } : {};
}

/** An event as a stream gave it. */
export interface Got {
  id: string | null;
  event: SessionEvent;
}

/**
 * One event stream read as it comes: its frames parsed (each event checked against its schema),
 * read on demand, so a test can act between two events.
 */
export class StreamReader {
  readonly frames: SseFrame[] = [];
  readonly events: Got[] = [];
  private iterator: AsyncGenerator<SseFrame> | null = null;
  private readonly abort = new AbortController();
  response!: Response;

  static async open(url: string, init: RequestInit = {}): Promise<StreamReader> {
    const reader = new StreamReader();
    reader.response = await fetch(url, { ...init, signal: reader.abort.signal });
    if (reader.response.body && reader.response.headers.get('content-type')?.startsWith('text/event-stream')) {
      reader.iterator = readSseFrames(reader.response.body, { lastEventId: '', retryMs: undefined });
    }
    return reader;
  }

  /** The next event, or null when the stream has ended. */
  async next(): Promise<Got | null> {
    for (;;) {
      const step = await this.iterator?.next();
      if (!step || step.done) return null;
      this.frames.push(step.value);
      if (step.value.data === null) continue;
      const got = {
        id: step.value.type === 'stream.truncated' ? null : step.value.lastEventId,
        event: SessionEvent.parse(JSON.parse(step.value.data)),
      };
      expect(got.event.type).toBe(step.value.type);
      this.events.push(got);
      return got;
    }
  }

  /** Reads until an event of `type` (inclusive); fails if the stream ends first. */
  async until(type: SessionEvent['type']): Promise<Got> {
    for (;;) {
      const got = await this.next();
      if (!got) throw new Error(`the stream ended before ${type}`);
      if (got.event.type === type) return got;
    }
  }

  /** Reads to the end of the stream; returns every event read. */
  async rest(): Promise<Got[]> {
    while (await this.next());
    return this.events;
  }

  /** The id the stream's first frame (id-only) gave: where it started. */
  get startId(): string | undefined {
    return this.frames.find((frame) => frame.data === null)?.lastEventId;
  }

  /** Cuts the connection. */
  close(): void {
    this.abort.abort();
  }
}

/** The content of the message.delta events of a turn, concatenated. */
export function deltaText(events: Got[], turnId?: string): string {
  return events
    .map(({ event }) =>
      event.type === 'message.delta' && (turnId === undefined || event.turn_id === turnId) ? (event.content ?? '') : '',
    )
    .join('');
}

/** Sends a message through `url` (202 expected) and returns the response. */
export async function send(url: string, sessionId: string, content: string, key?: string, extra: object = {}) {
  return fetch(`${url}/sessions/${sessionId}/messages`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...auth(key) },
    body: JSON.stringify({ content, ...extra }),
  });
}

/** Waits `ms`. */
export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
