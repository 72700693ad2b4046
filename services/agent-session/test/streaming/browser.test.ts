import { mkdirSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { chromium, type Browser } from 'playwright-core';
import { answerChat } from '../worker/worker-harness';
import { KEYS, orgAuthenticator, startStreamPlatform, type StreamPlatform } from './stream-harness';

// A page in a real browser (Debian's chromium through playwright-core) reads a turn with
// EventSource and shows its tokens as they arrive. EventSource cannot send Authorization, so the
// page talks to its own backend, which holds the key and forwards the stream, as a deployment would.
jest.setTimeout(120_000);

const ARTIFACTS = path.resolve(__dirname, '..', '..', '..', '..', 'artifacts', 'session-events');
const STORY =
  'Once upon a time, a gateway streamed every token the moment the model wrote it, and the page ' +
  'showed each word as it came, so nobody stared at a spinner again.';

const PAGE = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>Tollway session stream</title>
<style>
  body { font: 16px/1.5 system-ui, sans-serif; margin: 40px; max-width: 720px; color: #1d2430; }
  h1 { font-size: 20px; margin: 0 0 4px; }
  #status { color: #5b6472; font-size: 13px; margin-bottom: 16px; }
  #answer { border: 1px solid #d7dce3; border-radius: 8px; padding: 16px; min-height: 96px; white-space: pre-wrap; }
  #answer.done { border-color: #2f9e58; }
  #log { font: 12px ui-monospace, monospace; color: #5b6472; margin-top: 16px; }
</style>
</head>
<body>
<h1>Agent session</h1>
<div id="status">connecting…</div>
<div id="answer" aria-live="polite"></div>
<div id="log"></div>
<script>
  const sessionId = new URLSearchParams(location.search).get('session');
  const answer = document.getElementById('answer');
  const status = document.getElementById('status');
  const log = document.getElementById('log');
  window.arrivals = [];
  const source = new EventSource('/sessions/' + sessionId + '/events');
  source.addEventListener('open', () => {
    status.textContent = 'connected; sending the message';
    fetch('/send?session=' + sessionId, { method: 'POST' });
  });
  source.addEventListener('turn.started', () => (status.textContent = 'the agent is writing…'));
  source.addEventListener('message.delta', (e) => {
    const delta = JSON.parse(e.data);
    answer.textContent += delta.content || '';
    window.arrivals.push({ at: performance.now(), chars: answer.textContent.length, id: e.lastEventId });
    log.textContent = window.arrivals.length + ' deltas, last id ' + e.lastEventId;
  });
  source.addEventListener('turn.completed', (e) => {
    const done = JSON.parse(e.data);
    window.completed = done.response.response.content;
    answer.classList.add('done');
    status.textContent = 'done in ' + done.trace_metrics.total_duration.toFixed(2) + ' s';
    source.close();
  });
</script>
</body>
</html>`;

/** What the page keeps on `window`. */
interface PageGlobals {
  arrivals: Array<{ at: number; chars: number; id: string }>;
  completed?: string;
}

let platform: StreamPlatform;
let backend: http.Server;
let backendUrl: string;
let browser: Browser;

beforeAll(async () => {
  mkdirSync(ARTIFACTS, { recursive: true });
  platform = await startStreamPlatform({ replicaOptions: { authenticator: orgAuthenticator } });
  // The model writes a few characters every 40 ms: a turn of about three seconds.
  platform.reply = (request, res) => answerChat(request, res, STORY, 40, { paceMs: 40, pieceChars: 5 });
  const api = new URL(platform.replicas[0]!.url);
  // The page's backend: the page itself, its send, and the stream forwarded with the key added.
  backend = http.createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://backend');
    if (url.pathname === '/') {
      res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' }).end(PAGE);
      return;
    }
    const session = url.searchParams.get('session') ?? '';
    const forwarded =
      url.pathname === '/send'
        ? {
            method: 'POST',
            path: `/sessions/${session}/messages`,
            body: JSON.stringify({ content: 'A story, please.' }),
          }
        : { method: 'GET', path: url.pathname, body: undefined };
    const upstream = http.request(
      {
        host: api.hostname,
        port: api.port,
        method: forwarded.method,
        path: forwarded.path,
        headers: {
          authorization: `Bearer ${KEYS.a}`,
          'content-type': 'application/json',
          ...(req.headers['last-event-id'] ? { 'last-event-id': req.headers['last-event-id'] } : {}),
        },
      },
      (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(res);
      },
    );
    req.on('close', () => upstream.destroy());
    upstream.end(forwarded.body);
  });
  await new Promise<void>((resolve) => backend.listen(0, '127.0.0.1', resolve));
  backendUrl = `http://127.0.0.1:${(backend.address() as AddressInfo).port}`;
  browser = await chromium.launch({
    executablePath: '/usr/bin/chromium',
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking', '--disable-sync'],
  });
}, 90_000);

afterAll(async () => {
  await browser?.close();
  backend?.closeAllConnections();
  await new Promise<void>((resolve) => (backend ? backend.close(() => resolve()) : resolve()));
  await platform?.close();
});

it("shows a turn's tokens as they arrive, through EventSource", async () => {
  const sessionId = await platform.createSession(KEYS.a);
  const page = await browser.newPage({ viewport: { width: 900, height: 480 } });
  const errors: string[] = [];
  page.on('pageerror', (err) => errors.push(err.message));
  await page.goto(`${backendUrl}/?session=${sessionId}`);

  // Mid-turn: part of the answer is on the page, the turn is not over.
  await page.waitForFunction(() => (globalThis as unknown as PageGlobals).arrivals.length >= 5);
  const partial = await page.locator('#answer').textContent();
  await page.screenshot({ path: path.join(ARTIFACTS, 'streaming.png') });
  expect(await page.evaluate(() => (globalThis as unknown as PageGlobals).completed)).toBeUndefined();
  expect(partial!.length).toBeGreaterThan(0);
  expect(partial!.length).toBeLessThan(STORY.length);
  expect(STORY.startsWith(partial!)).toBe(true);

  await page.waitForFunction(() => typeof (globalThis as unknown as PageGlobals).completed === 'string');
  await page.screenshot({ path: path.join(ARTIFACTS, 'done.png') });
  const shown = await page.locator('#answer').textContent();
  const completed = await page.evaluate(() => (globalThis as unknown as PageGlobals).completed);
  expect(shown).toBe(STORY);
  expect(completed).toBe(STORY);
  // The text came in many deltas spread over the turn, not at its end.
  const arrivals = await page.evaluate(() => (globalThis as unknown as PageGlobals).arrivals);
  expect(arrivals.length).toBeGreaterThan(10);
  expect(arrivals.at(-1)!.at - arrivals[0]!.at).toBeGreaterThan(1000);
  expect(errors).toEqual([]);
  await page.close();
});
