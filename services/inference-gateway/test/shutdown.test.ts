import { randomUUID } from 'node:crypto';
import { request } from 'node:http';
import path from 'node:path';
import { Redis } from 'ioredis';
import { createAccountStore, deleteKeysWithPrefix } from '@tollway/accounts';
import { LiveRelays } from '../src/streaming/live-relays';
import { SHUTDOWN_EVENT } from '../src/streaming/sse-relay';
import { startGatewayProcess, writeCatalog } from './admission/gateway-process';
import {
  catalogModels,
  httpModel,
  RecordingAdmission,
  ssePayloads,
  startGateway,
  startSim,
  TEST_KEY,
} from './helpers/gateway-harness';

/** Posts a stream and collects its text; `onData` sees it as it comes. Resolves at its end. */
function stream(
  baseUrl: string,
  body: Record<string, unknown>,
  onData: (text: string) => void = () => undefined,
  key = TEST_KEY,
): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const req = request(
      `${baseUrl}/v1/chat/completions`,
      { method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' } },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (part: string) => {
          text += part;
          onData(text);
        });
        res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(JSON.stringify({ messages: [{ role: 'user', content: 'Count.' }], stream: true, ...body }));
  });
}

describe('streams a shutdown ends when its drain time is up', () => {
  it('end with the server_shutting_down event, no [DONE], the engine stopped and what was relayed settled', async () => {
    const slow = await startSim({ time_per_output_token_ms: 20, ignore_eos: true });
    const relays = new LiveRelays();
    const admission = new RecordingAdmission();
    const gateway = await startGateway(catalogModels([httpModel('sim/slow', [slow.baseUrl])]), {
      admission,
      liveRelays: relays,
    });
    try {
      let stopped = false;
      const answer = await stream(gateway.baseUrl, { model: 'sim/slow', max_tokens: 500 }, (text) => {
        // A few token chunks in (of 500, 10 s of them), the drain time is up.
        if (!stopped && ssePayloads(text).length >= 5) {
          stopped = true;
          expect(relays.size).toBe(1);
          relays.stopAll();
        }
      });
      expect(answer.status).toBe(200);
      const payloads = ssePayloads(answer.text);
      expect(payloads).not.toContain('[DONE]');
      expect(JSON.parse(payloads.at(-1) as string)).toEqual(SHUTDOWN_EVENT);
      const tokens = payloads.slice(0, -1).length - 1; // the role chunk carries none
      await admission.allClosed();
      expect(admission.tickets).toHaveLength(1);
      expect(admission.tickets[0]?.settled).toHaveLength(1);
      expect(admission.tickets[0]?.settled[0]?.completion_tokens).toBeGreaterThanOrEqual(tokens);
      expect(admission.tickets[0]?.settled[0]?.completion_tokens).toBeLessThan(500);
      expect(relays.size).toBe(0);
      // The engine's generation was stopped, not left running for nobody.
      const deadline = Date.now() + 2000;
      while (slow.sim.load().running > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
      expect(slow.sim.load().running).toBe(0);
      // A stream that starts once stopping began is ended at once the same way.
      const late = await stream(gateway.baseUrl, { model: 'sim/slow', max_tokens: 500 });
      expect(JSON.parse(ssePayloads(late.text).at(-1) as string)).toEqual(SHUTDOWN_EVENT);
    } finally {
      await gateway.close();
      await slow.sim.close();
    }
  });
});

describe('SIGTERM (the real main)', () => {
  const prefix = `test-${randomUUID()}:`;
  const redis = new Redis('redis://127.0.0.1:6379');
  const store = createAccountStore({ redis, prefix });
  afterAll(async () => {
    await deleteKeysWithPrefix(redis, prefix);
    redis.disconnect();
  });

  it('lets a short stream finish, ends a long one with the shutdown event at the drain time, settles both, and exits 0', async () => {
    const budgets = { requests: 1000, input_tokens: 1_000_000, output_tokens: 1_000_000 };
    const org = await store.createOrganization({ name: 'shutdown', budgets, credit: 100 });
    const key = (await store.createKey(org.id))!.key;
    const catalog = writeCatalog([
      {
        id: 'sim/slow',
        owned_by: 'test',
        created: 1767225600,
        price_per_million: { input: 1, output: 2 },
        engine: { kind: 'simulated', time_to_first_token_ms: 0, time_per_output_token_ms: 20, ignore_eos: true },
      },
    ]);
    const gateway = await startGatewayProcess(
      // A grace of 2 s: the drain time is 1 s (at least half of it).
      { CATALOG_PATH: catalog.file, SHUTDOWN_GRACE_MS: '2000', REDIS_PREFIX: prefix },
      path.join(__dirname, '../src/main.ts'),
    );
    try {
      let sent = false;
      const exited = new Promise<number | null>((resolve) => gateway.child.once('exit', (code) => resolve(code)));
      const started = Date.now();
      const short = stream(gateway.baseUrl, { model: 'sim/slow', max_tokens: 20 }, undefined, key); // 0.4 s
      const long = stream(
        gateway.baseUrl,
        { model: 'sim/slow', max_tokens: 1000 },
        (text) => {
          if (!sent && ssePayloads(text).length >= 3) {
            sent = true;
            gateway.child.kill('SIGTERM');
          }
        },
        key,
      ); // 20 s
      const [shortAnswer, longAnswer] = await Promise.all([short, long]);
      expect([shortAnswer.status, shortAnswer.text.slice(0, 300)]).toEqual([200, expect.anything()]);
      expect(ssePayloads(shortAnswer.text).at(-1)).toBe('[DONE]');
      const longPayloads = ssePayloads(longAnswer.text);
      expect(JSON.parse(longPayloads.at(-1) as string)).toEqual(SHUTDOWN_EVENT);
      expect(Date.now() - started).toBeLessThan(5000);
      expect(await exited).toBe(0);
      // Both were settled before the process left: the short one whole, the long one as relayed.
      const relayed = longPayloads.length - 2; // less the role chunk and the shutdown event
      const usage = await store.getUsage(org.id);
      expect(usage?.totals.requests).toBe(2);
      expect(usage?.totals.output_tokens).toBeGreaterThanOrEqual(20 + relayed);
      expect(usage?.totals.output_tokens).toBeLessThan(20 + 1000);
    } finally {
      await gateway.stop();
      catalog.remove();
    }
  });
});
