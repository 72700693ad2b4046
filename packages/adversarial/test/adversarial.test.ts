/**
 * The adversarial suite's CI profile: fast-check cases for every endpoint of both services,
 * sent over raw sockets to the built services (built first when stale), judged by the shared
 * oracles. About half a minute of cases per run; `pnpm fuzz` runs the same generators longer.
 *
 * Replay: the failure message names FUZZ_SEED and FUZZ_PATH; run
 *   FUZZ_SEED=<seed> FUZZ_PATH=<service>:<path> pnpm exec jest packages/adversarial
 */
import { readFileSync } from 'node:fs';
import net from 'node:net';
import * as fc from 'fast-check';
import { sendMessageStreaming, streamSessionEvents, type ReceivedSessionEvent } from '@tollway/contracts';
import { rawExchange } from '@tollway/service-kit/testing';
import {
  Campaign,
  ISSUE_REPRODUCTIONS,
  Platform,
  SESSION_LIMIT_REFUSALS,
  caseArbitrary,
  ensureBuilt,
  gatewayDeployedFlags,
  loadFuzzConfig,
  type ServiceName,
} from '../src';
import type { Problem } from '../src/oracles';

const config = loadFuzzConfig();
/** A checkpoint (health, RSS, session ledger) after every this many cases of a lane. */
const CHECKPOINT_EVERY = 100;

function report(problems: Problem[]): string {
  return problems.map((p) => `[${p.rule}] ${p.detail}`).join('\n');
}

describe('adversarial requests against the built gateway and session service', () => {
  let platform: Platform | undefined;
  let campaign: Campaign;

  beforeAll(async () => {
    ensureBuilt((line) => process.stderr.write(`adversarial: ${line}\n`));
    platform = new Platform({ prefixBase: config.prefixBase, redisUrl: config.redisUrl, baseEnv: config.serviceEnv });
    await platform.start();
    campaign = new Campaign(platform, { caseTimeoutMs: 10_000, rssLimitBytes: config.rssLimitBytes, settleMs: 15_000 });
    process.stderr.write(`adversarial: FUZZ_SEED=${config.seed} (prefix ${platform.prefix})\n`);
  }, 240_000);

  afterAll(async () => {
    await platform?.stop();
  }, 30_000);

  it('attacks the gateway as it is deployed: with the node flags of its start script', () => {
    const flags = gatewayDeployedFlags();
    expect(flags.length).toBeGreaterThan(0);
    const argv = readFileSync(`/proc/${platform!.gateway.pid}/cmdline`, 'utf8').split('\0');
    for (const flag of flags) expect(argv).toContain(flag);
  });

  it.each(ISSUE_REPRODUCTIONS.map((c) => [c.endpoint, c] as const))(
    'refuses %s with a 4xx and keeps serving',
    async (_name, c) => {
      const { outcome, problems } = await campaign.run(c, 'issue 10 reproduction');
      expect(report(problems)).toBe('');
      expect(outcome.kind === 'response' ? outcome.status : outcome.kind).toBeGreaterThanOrEqual(400);
      expect(outcome.kind === 'response' ? outcome.status : outcome.kind).toBeLessThan(500);
    },
  );

  it("refuses hostile session limits (issue 35) with a 4xx naming them, and changes none of the victim's", async () => {
    const victim = async () => {
      const { port } = platform!.gateway;
      const res = await fetch(`http://127.0.0.1:${port}/admin/v1/organizations/${platform!.context.victimOrgId}`, {
        headers: { authorization: `Bearer ${platform!.context.adminToken}` },
      });
      const org = (await res.json()) as { session_limits: unknown; name: string };
      return { session_limits: org.session_limits, name: org.name };
    };
    const before = await victim();
    const answers: string[] = [];
    for (const c of SESSION_LIMIT_REFUSALS) {
      const { outcome, problems } = await campaign.run(c, 'issue 35 refusal');
      expect(report(problems)).toBe('');
      const status = outcome.kind === 'response' ? outcome.status : 0;
      const error =
        outcome.kind === 'response'
          ? (JSON.parse(outcome.body.toString('utf8')) as { error: { code: string; param: string | null } }).error
          : null;
      // A body the schema judged names the limit (or session_limits itself); one refused before
      // (not JSON, too deep, too large) says so in its code.
      const named = error?.code !== 'invalid_request' || /^session_limits(\.|$)/.test(error.param ?? '');
      answers.push(`${c.endpoint}: ${status} ${error?.code} ${error?.param}${named ? '' : ' (param not a limit)'}`);
      expect(status >= 400 && status < 500 && named).toBe(true);
    }
    process.stderr.write(`adversarial: session limits refused:\n  ${answers.join('\n  ')}\n`);
    expect(await victim()).toEqual(before);
  }, 120_000);

  describe('bad bytes after good requests on one connection (HTTP/1.1 answers in order)', () => {
    // Found by `pnpm fuzz --seed 59`: the error answer to bad bytes was written as soon as the
    // parser failed, so a client read it as the answer to the request before, which was served.
    interface Good {
      head: (id: string) => string;
      /** Bills the fuzz organization one completion. */
      bills: boolean;
    }
    const request = (method: string, path: string, auth: string, body?: string) => (id: string) =>
      `${method} ${path} HTTP/1.1\r\nHost: x\r\nX-Request-Id: ${id}\r\n` +
      (auth ? `Authorization: Bearer ${auth}\r\n` : '') +
      (body === undefined
        ? '\r\n'
        : `Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`);
    const chatBody = (stream: boolean) =>
      JSON.stringify({ model: 'tollway/sim-chat', messages: [{ role: 'user', content: 'hi' }], max_tokens: 3, stream });
    const goods = (service: ServiceName): Good[] => {
      // The session cases act as an organization of their own (SendContext.sessionsOrgKey).
      const key = service === 'gateway' ? platform!.context.orgKey : platform!.context.sessionsOrgKey;
      return service === 'gateway'
        ? [
            { head: request('GET', '/v1/models', key), bills: false },
            { head: request('GET', '/healthz', ''), bills: false },
            { head: request('POST', '/v1/chat/completions', key, chatBody(false)), bills: true },
            { head: request('POST', '/v1/chat/completions', key, chatBody(true)), bills: true },
          ]
        : [
            { head: request('GET', '/sessions', key), bills: false },
            { head: request('GET', '/health', key), bills: false },
            { head: request('POST', '/sessions', key, '{}'), bills: false },
          ];
    };
    /** What may follow: each is refused with a 4xx in the envelope, then the connection closes. */
    const tails = (service: ServiceName): Array<[string, number]> => [
      ['NOT-HTTP at all\r\n\r\n', 400],
      ['GET / HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n', 400],
      ['CONNECT 127.0.0.1:9 HTTP/1.1\r\nHost: 127.0.0.1:9\r\n\r\n', 405],
      // A body that breaks the chunked framing, sent where the route reads the body before answering.
      [
        `POST ${service === 'gateway' ? '/v1/chat/completions' : '/sessions'} HTTP/1.1\r\nHost: x\r\n` +
          `Authorization: Bearer ${service === 'gateway' ? platform!.context.orgKey : platform!.context.sessionsOrgKey}\r\nTransfer-Encoding: chunked\r\n\r\nZZ\r\n{}\r\n0\r\n\r\n`,
        400,
      ],
    ];

    it.each(['gateway', 'sessions'] as const)(
      '%s: every good request is answered, in order, then the refusal',
      async (service) => {
        const port = platform!.service(service).port;
        let run = 0;
        await fc.assert(
          fc.asyncProperty(
            fc.array(fc.nat(goods(service).length - 1), { minLength: 1, maxLength: 4 }),
            fc.nat(tails(service).length - 1),
            fc.double({ min: 0, max: 1, noNaN: true }),
            async (picks, tailAt, cutAt) => {
              run += 1;
              const chosen = picks.map((i) => goods(service)[i] as Good);
              const ids = chosen.map((_, i) => `order-${run}-${i}`);
              const [tail, tailStatus] = tails(service)[tailAt] as [string, number];
              const bytes = Buffer.from(chosen.map((g, i) => g.head(ids[i] as string)).join('') + tail);
              // The same bytes in one write or in two, cut anywhere.
              const cut = Math.floor(cutAt * bytes.length);
              const parts = cut > 0 && cut < bytes.length ? [bytes.subarray(0, cut), bytes.subarray(cut)] : [bytes];
              const exchange = await rawExchange(port, parts, { waitMs: 10_000, gapMs: 5 });
              campaign.billing.noteServed(chosen.filter((g) => g.bills).length);
              const statuses = [...exchange.text.matchAll(/HTTP\/1\.1 (\d{3}) /g)].map((m) => Number(m[1]));
              const answeredIds = [...exchange.text.matchAll(/^x-request-id: (\S+)\r$/gim)].map((m) => m[1]);
              expect(exchange.ended).toBe('closed');
              expect(statuses.slice(0, -1).every((s) => s >= 200 && s < 300)).toBe(true);
              expect(statuses).toHaveLength(chosen.length + 1);
              expect(statuses.at(-1)).toBe(tailStatus);
              expect(answeredIds.slice(0, chosen.length)).toEqual(ids);
              const refusal = exchange.text.slice(exchange.text.lastIndexOf('\r\n\r\n') + 4);
              expect(JSON.parse(refusal)).toMatchObject({ error: { code: expect.any(String) } });
            },
          ),
          { numRuns: 40, seed: config.seed },
        );
      },
      120_000,
    );
  });

  describe('the session event streams, on the built services (real gateway, simulated engines)', () => {
    const base = () => `http://127.0.0.1:${platform!.sessions.port}`;
    const key = () => platform!.context.sessionsOrgKey;
    const created: string[] = [];
    const newSession = async () => {
      const res = await fetch(`${base()}/sessions`, { method: 'POST', headers: { authorization: `Bearer ${key()}` } });
      const id = ((await res.json()) as { session_id: string }).session_id;
      created.push(id);
      return id;
    };
    const collect = async (events: AsyncIterable<ReceivedSessionEvent>) => {
      const out: ReceivedSessionEvent[] = [];
      for await (const event of events) out.push(event);
      return out;
    };
    const text = (events: ReceivedSessionEvent[], field: 'content' | 'reasoning_content') =>
      events.map(({ event }) => (event.type === 'message.delta' ? (event[field] ?? '') : '')).join('');

    // The ledger counts every session of the organization: these are gone before it checks.
    afterAll(async () => {
      for (const id of created) {
        await fetch(`${base()}/sessions/${id}`, { method: 'DELETE', headers: { authorization: `Bearer ${key()}` } });
      }
    });

    it.each([['tollway/sim-chat'], ['tollway/sim-reasoner']])(
      'gives a turn of %s as deltas that concatenate exactly to the response.content of its turn.completed and of the session',
      async (model) => {
        const sessionId = await newSession();
        const reading = collect(streamSessionEvents({ baseUrl: base(), sessionId, apiKey: key() }));
        await new Promise((resolve) => setTimeout(resolve, 300));
        const sent = await fetch(`${base()}/sessions/${sessionId}/messages`, {
          method: 'POST',
          headers: { authorization: `Bearer ${key()}`, 'content-type': 'application/json' },
          body: JSON.stringify({ content: 'Tell me a long story.', user_params: { model, max_tokens: 300 } }),
        });
        expect(sent.status).toBe(202);
        const events = await reading;
        const last = events.at(-1)!.event;
        expect(last.type).toBe('turn.completed');
        if (last.type !== 'turn.completed') return;
        const content = last.response.response?.content ?? '';
        expect(content.length).toBeGreaterThan(20);
        expect(text(events, 'content')).toBe(content);
        if (model === 'tollway/sim-reasoner') expect(text(events, 'reasoning_content').length).toBeGreaterThan(0);
        const session = await fetch(`${base()}/sessions/${sessionId}`, {
          headers: { authorization: `Bearer ${key()}` },
        });
        expect(((await session.json()) as { response: { content: string } }).response.content).toBe(content);
        expect(last.trace_metrics.total_tokens).toBeGreaterThan(0);
        // The same through a send answered as a stream.
        const streamed = await collect(
          sendMessageStreaming({
            baseUrl: base(),
            sessionId,
            apiKey: key(),
            message: { content: 'Again.', user_params: { model } },
          }),
        );
        const end = streamed.at(-1)!.event;
        expect(streamed[0]!.event.type).toBe('turn.started');
        expect(end.type === 'turn.completed' && end.response.response?.content).toBe(text(streamed, 'content'));
      },
      60_000,
    );

    it('holds neither memory nor turns for readers that never read', async () => {
      const sessionId = await newSession();
      const port = platform!.sessions.port;
      const before = platform!.sessions.sampleRss();
      const stalled = Array.from({ length: 200 }, () => {
        const socket = net.connect(port, '127.0.0.1');
        socket.pause();
        socket.on('error', () => undefined);
        socket.write(
          `GET /sessions/${sessionId}/events?follow=true HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key()}\r\n\r\n`,
        );
        return socket;
      });
      try {
        for (let turn = 0; turn < 8; turn++) {
          const sent = await fetch(`${base()}/sessions/${sessionId}/messages`, {
            method: 'POST',
            headers: { authorization: `Bearer ${key()}`, 'content-type': 'application/json' },
            body: JSON.stringify({ content: 'More.', user_params: { max_tokens: 2000 } }),
          });
          expect(sent.status).toBe(202);
          const done = await fetch(`${base()}/sessions/${sessionId}?wait=true&timeout=20`, {
            headers: { authorization: `Bearer ${key()}` },
          });
          expect(((await done.json()) as { status: string }).status).toBe('idle');
        }
        expect((await fetch(`${base()}/healthz`)).status).toBe(200);
        const grown = platform!.sessions.sampleRss() - before;
        expect(grown).toBeLessThan(96 * 2 ** 20);
      } finally {
        for (const socket of stalled) socket.destroy();
      }
    }, 120_000);
  });

  it('answers every mutated request below 500, in the error shape, with no crash or hang', async () => {
    const lane = async (service: ServiceName) => {
      const [only, path] = config.path?.split(/:(.*)/s) ?? [];
      if (only !== undefined && only !== service) return;
      let count = 0;
      const property = fc.asyncProperty(caseArbitrary(service), async (c) => {
        const { problems } = await campaign.run(c, `FUZZ_SEED=${config.seed}`);
        count += 1;
        // Each lane checks its own ledger: it is paused then, so none of its cases is in flight.
        if (count % CHECKPOINT_EVERY === 0)
          problems.push(
            ...(await campaign.checkpoint(`after ${count} ${service} cases`, {
              ledger: service === 'sessions',
              billing: service === 'gateway',
            })),
          );
        if (problems.length > 0) throw new Error(`${campaign.findings.at(-1)?.request}\n${report(problems)}`);
      });
      try {
        await fc.assert(property, {
          // Each lane its own stream of cases, both from the one printed seed.
          seed: service === 'gateway' ? config.seed : config.seed + 1,
          path,
          numRuns: config.casesPerService,
          endOnFailure: true,
          interruptAfterTimeLimit: config.timeLimitMs,
          markInterruptAsFailure: false,
        });
      } catch (err) {
        const found = /seed: (-?\d+), path: "([^"]*)"/.exec((err as Error).message);
        const replay = found ? `\nReplay: FUZZ_SEED=${config.seed} FUZZ_PATH=${service}:${found[2]}` : '';
        const last = campaign.findings.at(-1);
        const detail = last ? `\n${last.request}\n→ ${last.outcome}\n${report(last.problems)}` : '';
        throw new Error(`${(err as Error).message}${detail}${replay}`);
      }
    };
    // Both lanes end before the verdict, so the next test's checkpoint never overlaps a lane.
    const lanes = await Promise.allSettled([lane('gateway'), lane('sessions')]);
    process.stderr.write(`adversarial: ${campaign.summaryLine()}\n`);
    const failures = lanes.flatMap((l) => (l.status === 'rejected' ? [(l.reason as Error).message] : []));
    if (failures.length > 0) throw new Error(failures.join('\n\n'));
  }, 180_000);

  it('keeps both services alive and under the RSS limit, loses no session, message or turn, and bills each completion once', async () => {
    const problems = await campaign.checkpoint('end of run');
    expect(report(problems)).toBe('');
    process.stderr.write(
      `adversarial: peak RSS gateway ${(platform!.gateway.peakRss / 2 ** 20).toFixed(0)} MiB, sessions ${(platform!.sessions.peakRss / 2 ** 20).toFixed(0)} MiB; ${campaign.ledger.size} sessions held; ${campaign.billing.summary()}\n`,
    );
  }, 60_000);
});
