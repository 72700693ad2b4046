import { spawn } from 'node:child_process';
import http, { type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { createLogger } from '@tollway/service-kit';
import { freePort } from '@tollway/service-kit/testing';
import type { ChildInit } from '../../src/worker/child-protocol';
import { startWorker, type RunningWorker } from '../../src/worker/start-worker';
import { loadWorkerConfig, type WorkerConfig } from '../../src/worker-config';

/** A request a test server received. */
export interface Received {
  method: string;
  url: string;
  headers: IncomingHttpHeaders;
  body: string;
  json: unknown;
}

/** A real HTTP server on 127.0.0.1 that records requests and answers through `handler`. */
export interface TestServer {
  url: string;
  received: Received[];
  close(): Promise<void>;
}

/** Starts a recording HTTP server; `handler` may answer, delay or never answer. */
export async function startTestServer(
  handler: (request: Received, res: ServerResponse, index: number) => void,
): Promise<TestServer> {
  const received: Received[] = [];
  const server = http.createServer((req: IncomingMessage, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      let json: unknown = null;
      try {
        json = JSON.parse(body);
      } catch {
        json = null;
      }
      const request = { method: req.method ?? '', url: req.url ?? '', headers: req.headers, body, json };
      received.push(request);
      handler(request, res, received.length - 1);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    received,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** Answers JSON with `status` and extra headers. */
export function sendJson(
  res: ServerResponse,
  status: number,
  body: unknown,
  headers: Record<string, string> = {},
): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text), ...headers });
  res.end(text);
}

/** A chat completion body answering `content`, with usage. */
export function completion(content: string | null, totalTokens = 7, toolCalls?: unknown[]): unknown {
  return {
    id: 'chatcmpl-test',
    object: 'chat.completion',
    created: 1,
    model: 'tollway/sim-chat',
    choices: [
      {
        index: 0,
        message: { role: 'assistant', content, ...(toolCalls ? { tool_calls: toolCalls } : {}) },
        finish_reason: toolCalls ? 'tool_calls' : 'stop',
      },
    ],
    usage: { prompt_tokens: totalTokens - 2, completion_tokens: 2, total_tokens: totalTokens },
  };
}

/** Options of sendStream. */
export interface StreamReply {
  /** Reasoning text sent before the content. */
  reasoning?: string;
  /** Tool calls, each sent as a delta with its id and name, then its arguments in two pieces. */
  toolCalls?: Array<{ id: string; type: 'function'; function: { name: string; arguments: string } }>;
  /** Stop writing after this many content pieces, and cut the connection once they have gone. */
  cutAfter?: number;
  /** Characters of content per chunk; default 3. */
  pieceChars?: number;
  /** Wait this long between two chunks, ms; default 0 (all at once). */
  paceMs?: number;
}

/**
 * Answers a streamed chat request as the gateway does: a role chunk, the content in pieces (of
 * three characters by default), the finish chunk, a usage chunk with empty choices, then
 * `data: [DONE]`; all at once or paced.
 */
/**
 * Answers a chat request as a gateway would: as a stream (see sendStream) when it asks for one,
 * else the whole completion once the stream would have ended (pieces × `paceMs`). The agent
 * streams only while its session has readers.
 */
export function answerChat(
  request: Received,
  res: ServerResponse,
  content: string | null,
  totalTokens = 7,
  options: StreamReply = {},
): void {
  if ((request.json as { stream?: unknown } | null)?.stream === true) {
    sendStream(res, content, totalTokens, options);
    return;
  }
  const pieces = Math.ceil((content?.length ?? 0) / (options.pieceChars ?? 3));
  setTimeout(() => sendJson(res, 200, completion(content, totalTokens)), (options.paceMs ?? 0) * pieces);
}

export function sendStream(
  res: ServerResponse,
  content: string | null,
  totalTokens = 7,
  options: StreamReply = {},
): void {
  res.writeHead(200, { 'content-type': 'text/event-stream' });
  const usage = { prompt_tokens: totalTokens - 2, completion_tokens: 2, total_tokens: totalTokens };
  const base = { id: 'chatcmpl-test', object: 'chat.completion.chunk', created: 1, model: 'tollway/sim-chat' };
  const chunk = (delta: Record<string, unknown>, finish: string | null = null) =>
    `data: ${JSON.stringify({ ...base, choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`;
  const frames = [chunk({ role: 'assistant', content: '' })];
  if (options.reasoning) frames.push(chunk({ reasoning_content: options.reasoning }));
  const pieces = content?.match(new RegExp(`[\\s\\S]{1,${options.pieceChars ?? 3}}`, 'g')) ?? [];
  const cutAt = options.cutAfter === undefined ? Infinity : frames.length + options.cutAfter;
  for (const piece of pieces) frames.push(chunk({ content: piece }));
  for (const [index, call] of (options.toolCalls ?? []).entries()) {
    const { name, arguments: args } = call.function;
    const half = Math.ceil(args.length / 2);
    frames.push(chunk({ tool_calls: [{ index, id: call.id, type: 'function', function: { name, arguments: '' } }] }));
    frames.push(chunk({ tool_calls: [{ index, function: { arguments: args.slice(0, half) } }] }));
    frames.push(chunk({ tool_calls: [{ index, function: { arguments: args.slice(half) } }] }));
  }
  frames.push(chunk({}, options.toolCalls ? 'tool_calls' : 'stop'));
  frames.push(`data: ${JSON.stringify({ ...base, choices: [], usage })}\n\n`, 'data: [DONE]\n\n');
  const write = (at: number): void => {
    if (res.destroyed) return;
    if (at >= cutAt) {
      // Cut once what was written has left (destroy() would drop it unsent).
      setTimeout(() => res.destroy(), 50);
      return;
    }
    if (at === frames.length) {
      res.end();
      return;
    }
    res.write(frames[at]);
    if (options.paceMs) setTimeout(() => write(at + 1), options.paceMs);
    else write(at + 1);
  };
  write(0);
}

/** A real inference gateway, run from its sources in a process of its own. */
export interface GatewayProcess {
  /** Its inference API, ending in `/v1`. */
  baseUrl: string;
  /** SIGTERM, and resolves once it has exited. */
  stop(): Promise<void>;
}

/**
 * Starts the gateway (`services/inference-gateway/src/main.ts`, its shipped catalog of simulated
 * models) on a free port over `prefix`, with `env` on top; resolves once `/readyz` answers 200.
 */
export async function startGatewayProcess(prefix: string, env: Record<string, string>): Promise<GatewayProcess> {
  const port = await freePort();
  const main = path.join(__dirname, '..', '..', '..', 'inference-gateway', 'src', 'main.ts');
  const child = spawn(process.execPath, ['--conditions=@tollway/source', '--import', 'tsx', main], {
    env: {
      ...process.env,
      GATEWAY_PORT: String(port),
      GATEWAY_HOST: '127.0.0.1',
      REDIS_PREFIX: prefix,
      CATALOG_WATCH: 'false',
      LOG_LEVEL: 'error',
      ...env,
    },
    stdio: 'ignore',
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  await waitFor(
    async () => (await fetch(`http://127.0.0.1:${port}/readyz`).catch(() => null))?.status === 200,
    20_000,
    100,
  );
  return {
    baseUrl: `http://127.0.0.1:${port}/v1`,
    async stop() {
      if (child.exitCode === null) child.kill('SIGTERM');
      await exited;
    },
  };
}

/** Polls `check` until it returns a value other than undefined/false, or fails after `timeoutMs`. */
export async function waitFor<T>(
  check: () => T | Promise<T>,
  timeoutMs = 5000,
  stepMs = 20,
): Promise<Exclude<T, false | undefined>> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined && value !== false) return value as Exclude<T, false | undefined>;
    if (Date.now() > deadline) throw new Error(`condition not met within ${timeoutMs} ms`);
    await sleep(stepMs);
  }
}

/** Resolves after `ms`. */
export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** Whether a process with this id exists. */
export function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** Path of a fixture agent module under test/worker/fixtures. */
export function fixtureAgent(name: string): string {
  return path.join(__dirname, 'fixtures', `${name}.agent.ts`);
}

/** Path of a built-in agent module under src/agents. */
export function builtInAgent(name: string): string {
  return path.join(__dirname, '..', '..', 'src', 'agents', `${name}.agent.ts`);
}

/** The agent process entry, from sources. */
export const TURN_CHILD_FILE = path.join(__dirname, '..', '..', 'src', 'worker', 'turn-child.ts');

/** What an agent process is started with in tests: the echo agent, a gateway nobody answers at, one try. */
export const ECHO_CHILD_INIT: Omit<ChildInit, 'type'> = {
  agentModule: builtInAgent('echo'),
  gatewayBaseUrl: 'http://127.0.0.1:9/v1',
  gatewayApiKey: 'unused',
  gatewayTimeoutMs: 1000,
  settings: { defaultModel: 'tollway/sim-chat', maxModelTries: 1, retryBaseDelayMs: 1, retryMaxDelayMs: 1 },
  logLevel: 'error',
};

/** A worker config for tests: short leases, 127.0.0.1 webhooks allowed, env overrides. */
export function testWorkerConfig(prefix: string, env: Record<string, string> = {}): WorkerConfig {
  return loadWorkerConfig({
    argv: [],
    env: {
      REDIS_PREFIX: prefix,
      WORKER_CONCURRENCY: '2',
      GATEWAY_API_KEY: 'sk-test',
      WEBHOOK_ALLOWED_HOSTS: '127.0.0.1',
      WORKER_LEASE_TTL_MS: '1000',
      REAPER_INTERVAL_MS: '200',
      AGENT_RETRY_BASE_DELAY_MS: '10',
      AGENT_RETRY_MAX_DELAY_MS: '50',
      LOG_LEVEL: 'error',
      ...env,
    },
  });
}

/** Starts an in-process worker (its agent processes are real child processes) with a silent logger. */
export function startTestWorker(prefix: string, env: Record<string, string> = {}): Promise<RunningWorker> {
  return startWorker(testWorkerConfig(prefix, env), {
    logger: createLogger({ service: 'agent-session-worker-test', silent: true }),
  });
}
