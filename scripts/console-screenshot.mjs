#!/usr/bin/env node
// Makes docs/console-usage.png, the console's usage page as the README shows it: a built gateway
// (`pnpm build` first) on its own Redis prefix serves a catalog of simulated engines named like a
// platform team's models; an organization, "Northwind Analytics", gets an admin key and one key
// per application; three applications send it real chat completions through the official openai
// SDK for `--minutes` (a support assistant streaming on the small model all day, a documentation
// search on the large one, a code-review bot whose CI runs come in bursts); then Debian's chromium,
// through playwright-core, signs in with the admin key, opens Usage and takes the picture while the
// traffic still runs. The prefix's keys are deleted
// afterwards.
//
//   pnpm screenshot:console [--minutes 25] [--port 0] [--redis-prefix console-shot-<uuid>:]
//                           [--out docs/console-usage.png]
//
// REDIS_URL (default redis://127.0.0.1:6379) names the Redis.
import { randomBytes, randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { benchArgs } from '../bench/lib/args.mjs';
import { startService } from '../bench/lib/processes.mjs';
import { launchChromium } from '../services/inference-gateway/test/console/chromium.ts';
import { gatewayStartFlags } from './gateway-start-flags.mjs';

const ROOT = resolve(fileURLToPath(import.meta.url), '..', '..');
const GATEWAY = join(ROOT, 'services', 'inference-gateway');
// The gateway's dependencies: the openai SDK, ioredis and the accounts package.
const require = createRequire(join(GATEWAY, 'package.json'));
const OpenAI = require('openai').default;
const { Redis } = require('ioredis');
const { deleteKeysWithPrefix } = require('@tollway/accounts');

const args = benchArgs(
  'pnpm screenshot:console [--minutes 25] [--port 0] [--redis-prefix P] [--out docs/console-usage.png]',
  {
    numbers: { minutes: 25, port: 0 },
    strings: { 'redis-prefix': `console-shot-${randomUUID()}:`, out: join(ROOT, 'docs', 'console-usage.png') },
  },
);
const redisUrl = process.env.REDIS_URL || 'redis://127.0.0.1:6379';
const adminToken = randomBytes(24).toString('base64url');

/** Models as a team serving open-weight models would list them; the engines are simulated. */
const CATALOG = {
  models: [
    simulated('meta/llama-3.1-8b-instruct', 'meta', { input: 0.05, output: 0.08 }, 120, 12),
    simulated('meta/llama-3.1-70b-instruct', 'meta', { input: 0.35, output: 0.4 }, 300, 28),
    simulated('qwen/qwen2.5-coder-32b-instruct', 'qwen', { input: 0.2, output: 0.2 }, 220, 20),
  ],
};

function simulated(id, ownedBy, price, ttftMs, tpotMs) {
  return {
    id,
    owned_by: ownedBy,
    created: 1767225600,
    capacity: 64,
    price_per_million: price,
    // Writing to max_tokens, which each request draws, gives answers of many lengths.
    engine: { kind: 'simulated', time_to_first_token_ms: ttftMs, time_per_output_token_ms: tpotMs, ignore_eos: true },
  };
}

const WORDS = (
  'the customer order invoice shipment refund account password reset delivery address warranty ' +
  'policy product return label tracking number payment card subscription plan upgrade support ' +
  'ticket escalation summary answer question documentation search result install configure ' +
  'cluster deploy release function method variable review change test failure diff commit'
).split(' ');

/** A prompt of about `tokens` tokens (one short word is about one token). */
function prompt(tokens) {
  return Array.from({ length: tokens }, () => WORDS[Math.floor(Math.random() * WORDS.length)]).join(' ');
}

/**
 * The applications: each with its key's name, its model, how it calls, and its requests in minute
 * `m` of the run (a busy morning: the support assistant climbs, docs search follows, CI bursts).
 */
const APPLICATIONS = [
  {
    key: 'support-assistant (production)',
    model: 'meta/llama-3.1-8b-instruct',
    stream: true,
    promptTokens: [250, 700],
    maxTokens: 220,
    perMinute: (m) => 45 + 35 * Math.sin(m / 7) + 10 * Math.random(),
  },
  {
    key: 'docs-search (production)',
    model: 'meta/llama-3.1-70b-instruct',
    stream: false,
    promptTokens: [900, 1600],
    maxTokens: 180,
    perMinute: (m) => 12 + 6 * Math.cos(m / 5) + 4 * Math.random(),
  },
  {
    key: 'code-review-bot (ci)',
    model: 'qwen/qwen2.5-coder-32b-instruct',
    stream: false,
    promptTokens: [1500, 3000],
    maxTokens: 320,
    perMinute: (m) => (m % 6 < 2 ? 18 + 8 * Math.random() : 0),
  },
];

async function admin(baseUrl, method, path, body) {
  const res = await fetch(`${baseUrl}/admin/v1${path}`, {
    method,
    headers: { authorization: `Bearer ${adminToken}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${await res.text()}`);
  return res.json();
}

/** Sends each application's requests for minute after minute until `stop()`; counts the answers. */
function driveTraffic(baseUrl, keys) {
  const counts = { ok: 0, failed: 0 };
  const inFlight = new Set();
  const timers = new Set();
  let minute = 0;
  const clients = APPLICATIONS.map(
    (app) => new OpenAI({ apiKey: keys[app.key], baseURL: `${baseUrl}/v1`, maxRetries: 0 }),
  );
  const send = async (app, client) => {
    const [low, high] = app.promptTokens;
    const body = {
      model: app.model,
      messages: [
        { role: 'system', content: `You are the ${app.key.split(' ')[0]} of Northwind.` },
        { role: 'user', content: prompt(low + Math.floor(Math.random() * (high - low))) },
      ],
      max_tokens: Math.round(app.maxTokens * (0.3 + 0.7 * Math.random())),
    };
    if (app.stream) {
      const stream = await client.chat.completions.create({ ...body, stream: true });
      for await (const chunk of stream) void chunk;
    } else {
      await client.chat.completions.create(body);
    }
  };
  const scheduleMinute = () => {
    APPLICATIONS.forEach((app, index) => {
      const n = Math.max(0, Math.round(app.perMinute(minute)));
      for (let i = 0; i < n; i++) {
        const timer = setTimeout(
          () => {
            timers.delete(timer);
            const request = send(app, clients[index]).then(
              () => counts.ok++,
              () => counts.failed++,
            );
            inFlight.add(request);
            void request.finally(() => inFlight.delete(request));
          },
          ((i + Math.random()) * 60_000) / n,
        );
        timers.add(timer);
      }
    });
    minute++;
  };
  scheduleMinute();
  const everyMinute = setInterval(scheduleMinute, 60_000);
  return {
    counts,
    async stop() {
      clearInterval(everyMinute);
      for (const timer of timers) clearTimeout(timer);
      await Promise.allSettled([...inFlight]);
    },
  };
}

async function screenshot(baseUrl, adminKey) {
  const browser = await launchChromium();
  try {
    const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
    await page.goto(`${baseUrl}/console/`);
    await page.getByLabel('Admin token or organization admin key').fill(adminKey);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('link', { name: 'Usage' }).click();
    await page.getByRole('heading', { name: /Usage/, level: 1 }).waitFor();
    for (const app of APPLICATIONS) await page.getByRole('row', { name: new RegExp(app.model) }).waitFor();
    await page.screenshot({ path: args.out, fullPage: true });
  } finally {
    await browser.close();
  }
}

async function main() {
  const prefix = args['redis-prefix'];
  const dir = mkdtempSync(join(tmpdir(), 'tollway-console-shot-'));
  const catalogPath = join(dir, 'catalog.json');
  writeFileSync(catalogPath, JSON.stringify(CATALOG));
  const gateway = await startService(join(GATEWAY, 'dist', 'main.js'), {
    cwd: GATEWAY,
    execArgv: gatewayStartFlags().flags,
    env: {
      GATEWAY_PORT: String(args.port),
      GATEWAY_HOST: '127.0.0.1',
      REDIS_URL: redisUrl,
      REDIS_PREFIX: prefix,
      ADMIN_TOKEN: adminToken,
      CATALOG_PATH: catalogPath,
      CATALOG_WATCH: 'false',
      LOG_LEVEL: 'info',
    },
  });
  const baseUrl = `http://127.0.0.1:${gateway.port}`;
  let traffic = null;
  try {
    const org = await admin(baseUrl, 'POST', '/organizations', {
      id: 'northwind',
      name: 'Northwind Analytics',
      budgets: { requests: 600, input_tokens: 2_000_000, output_tokens: 400_000 },
      credit: 250,
    });
    const keys = {};
    for (const app of APPLICATIONS) {
      keys[app.key] = (await admin(baseUrl, 'POST', `/organizations/${org.id}/keys`, { name: app.key })).key;
    }
    const adminKey = (
      await admin(baseUrl, 'POST', `/organizations/${org.id}/keys`, { name: 'platform team', role: 'admin' })
    ).key;
    traffic = driveTraffic(baseUrl, keys);
    console.log(`console-screenshot: ${args.minutes} minutes of traffic to ${baseUrl} (prefix ${prefix})`);
    // The charts count by the clock's minutes: the page is opened 50 s into one, so the last
    // point is nearly whole instead of a fall towards zero (the page loads in a second or two).
    const last = Date.now() + Math.max(0, args.minutes - 1) * 60_000;
    await new Promise((done) => setTimeout(done, last - Date.now() + ((110_000 - (last % 60_000)) % 60_000)));
    await screenshot(baseUrl, adminKey);
    console.log(
      `console-screenshot: ${traffic.counts.ok} answered, ${traffic.counts.failed} failed; wrote ${args.out}`,
    );
  } finally {
    await traffic?.stop();
    await gateway.stop();
    rmSync(dir, { recursive: true, force: true });
    const redis = new Redis(redisUrl);
    await deleteKeysWithPrefix(redis, prefix);
    await redis.quit();
  }
}

main().catch((err) => {
  console.error(`console-screenshot: ${err instanceof Error ? err.message : String(err)}`);
  process.exit(1);
});
