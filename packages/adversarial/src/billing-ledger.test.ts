import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { BillingLedger } from './billing-ledger';
import { answerOf, CHAT_CASE } from './case-fixtures';
import type { FuzzCase } from './fuzz-case';
import type { Outcome } from './raw-http';

const chat = CHAT_CASE;
const models: FuzzCase = { ...chat, endpoint: 'GET /v1/models', method: 'GET', target: '/v1/models' };

const answer = (status: number, body: string, contentType?: string, bodyBytes?: number) =>
  answerOf(status, body, contentType, bodyBytes);
const completion = answer(200, '{"id":"c","object":"chat.completion","choices":[]}');
const stream = answer(200, 'data: {}\n\ndata: [DONE]\n\n', 'text/event-stream; charset=utf-8');
const closed: Outcome = { kind: 'closed', ms: 1, reason: 'reset' };

/** A stand-in for the gateway's usage endpoint that reports `billed` requests. */
async function usageServer(billed: () => number): Promise<{ server: Server; port: number }> {
  const server = createServer((req, res) => {
    if (req.headers.authorization !== 'Bearer admin' || !req.url?.startsWith('/admin/v1/organizations/org_1/usage')) {
      res.statusCode = 404;
      res.end();
      return;
    }
    res.setHeader('content-type', 'application/json');
    res.end(JSON.stringify({ object: 'organization.usage', totals: { requests: billed() } }));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, port: (server.address() as AddressInfo).port };
}

describe('BillingLedger', () => {
  let billed = 0;
  let server: Server;
  let port: number;
  beforeAll(async () => ({ server, port } = await usageServer(() => billed)));
  afterAll(() => server.close());
  const ledger = () => new BillingLedger(() => port, 'admin', 'org_1');

  it('counts a served completion, JSON or stream, as billed once; refusals and other answers bill nothing', async () => {
    const l = ledger();
    l.record(chat, completion);
    l.record(chat, stream);
    l.record(chat, answer(400, '{"error":{}}'));
    l.record(chat, answer(502, '{"error":{}}'));
    l.record(models, answer(200, '{"object":"list","data":[]}'));
    billed = 2;
    expect(await l.check(0)).toEqual([]);
    billed = 1;
    expect((await l.check(0)).map((p) => p.detail)).toEqual([
      '2 completions served, 1 billed after 0 ms: 1 never charged',
    ]);
    billed = 3;
    expect((await l.check(0)).map((p) => p.detail)).toEqual([
      '3 requests billed, at most 2 could have been served (2 seen, 0 unseen)',
    ]);
  });

  it('allows for requests whose fate it cannot see, and only those that may reach the chat route', () => {
    const l = ledger();
    l.record(chat, closed); // no answer: maybe served, then aborted
    l.record({ ...chat, framing: { kind: 'truncated', keep: 3 } }, answer(400, '{}')); // answer of unclear bytes
    l.record({ ...chat, framing: { kind: 'pipelined', copies: 2 } }, completion); // copies cut off
    l.record(chat, answer(200, '{"object":"chat.comp', 'application/json', 100_000)); // cut short
    l.record(models, closed);
    l.record({ ...chat, method: 'GET' }, closed);
    expect(l.summary()).toBe('1 completions served, 0 requests billed (5 requests unseen)');
  });

  it('waits for settlements to land, up to the settle time', async () => {
    const l = ledger();
    l.record(chat, completion);
    billed = 0;
    setTimeout(() => (billed = 1), 300);
    expect(await l.check(5000)).toEqual([]);
  });

  it('reports a usage endpoint that does not answer 200', async () => {
    const l = new BillingLedger(() => port, 'wrong token', 'org_1');
    expect((await l.check(0)).map((p) => p.detail)).toEqual(['GET usage answered 404']);
  });
});
