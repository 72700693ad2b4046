import * as fc from 'fast-check';
import { caseArbitrary } from './case-arbitraries';
import { breaksContract } from './contract-oracle';
import { ANOTHER_ORGANIZATION, gatewayEndpoints, sessionEndpoints } from './endpoints';
import { SESSION_LIMIT_REFUSALS } from './session-limit-refusals';
import { encodeCase, type SendContext } from './fuzz-case';
import { ByteString, Deep, Entries, LongString, RawToken, Repeat, toJsonBytes } from './hostile-json';

const ctx: SendContext = {
  host: '127.0.0.1',
  port: 1,
  orgKey: 'KEY',
  sessionsOrgKey: 'SESSIONS-KEY',
  adminToken: 'ADMIN',
  consoleCookie: 'SESSION.SIG',
  csrfToken: 'CSRF',
  tenantKey: 'TENANT',
  tenantSessionsKey: 'TENANT-STANDARD',
  orgId: 'org',
  victimOrgId: 'victim',
  victimKeyId: 'key',
  sessionId: '00000000-0000-4000-8000-000000000000',
  webhookUrl: 'http://127.0.0.1:9/hook',
  hostileModel: 'hostile/huge-json',
};
const refs = ctx;

describe('hostile JSON', () => {
  it('writes what JSON.stringify cannot: raw tokens, invalid UTF-8, duplicate keys', () => {
    const bytes = toJsonBytes(
      {
        a: new RawToken('NaN'),
        b: new ByteString([0xff], 'x'),
        c: new Entries([
          ['k', 1],
          ['k', 2],
        ]),
      },
      refs,
    );
    expect(bytes.toString('latin1')).toBe('{"a":NaN,"b":"x\xff","c":{"k":1,"k":2}}');
  });

  it('nests 100 000 deep and repeats 100 000 times without recursion', () => {
    expect(toJsonBytes(new Deep(100_000, 'array'), refs).length).toBe(200_001);
    expect(toJsonBytes(new Repeat(1, 100_000), refs).length).toBe(200_001);
  });
});

describe('breaksContract', () => {
  const chat = ['v1', 'chat', 'completions'];
  it('holds a valid chat body valid and the issue’s bodies invalid', () => {
    const valid = { model: 'tollway/sim-chat', messages: [{ role: 'user', content: 'hi' }] };
    expect(breaksContract('gateway', 'POST', chat, valid)).toBe(false);
    expect(breaksContract('gateway', 'POST', chat, { ...valid, n: 100_000_000 })).toBe(true);
    expect(breaksContract('gateway', 'POST', chat, { ...valid, temperature: new RawToken('NaN') })).toBe(true);
    expect(breaksContract('sessions', 'POST', ['sessions', 'x', 'messages'], { webhook: { url: 'ftp://x/' } })).toBe(
      true,
    );
  });
});

describe('SESSION_LIMIT_REFUSALS', () => {
  it("each breaks the admin API's contract and must be refused, as the operator (issue 35)", () => {
    for (const c of SESSION_LIMIT_REFUSALS) {
      expect([c.endpoint, c.mustRefuse, c.headers[0]]).toEqual([
        c.endpoint,
        true,
        ['Authorization', 'Bearer {adminToken}'],
      ]);
      const segments = c.target.split('/').slice(1);
      expect([c.endpoint, breaksContract('gateway', c.method, segments, c.body as never)]).toEqual([c.endpoint, true]);
    }
  });
});

describe('caseArbitrary', () => {
  it.each(['gateway', 'sessions'] as const)(
    'reaches every %s endpoint and every kind of mutation within 600 cases',
    (service) => {
      const cases = fc.sample(caseArbitrary(service), { seed: 1, numRuns: 600 });
      const templates = service === 'gateway' ? gatewayEndpoints() : sessionEndpoints();
      const endpoints = new Set(cases.map((c) => c.endpoint));
      for (const t of templates) expect(endpoints).toContain(t.name);
      const labels = cases.flatMap((c) => c.mutations).join('\n');
      for (const family of [
        'number',
        'invalid UTF-8',
        'nested',
        'twice',
        'path segment',
        'query',
        'method',
        'header',
        'framing',
        'pipelined',
        'HTTP/1.0',
        'string of',
      ])
        expect(labels).toContain(family);
      expect(cases.filter((c) => c.mutations.length === 0).length).toBeGreaterThan(30);
      // Every case encodes to bytes (no generator builds something the encoder cannot write).
      for (const c of cases.slice(0, 200)) expect(Buffer.concat(encodeCase(c, ctx).parts).length).toBeGreaterThan(0);
    },
  );

  it('sends the console session on console cases, and requires a refusal of a write whose CSRF token or Origin was broken', () => {
    const cases = fc
      .sample(caseArbitrary('gateway'), { seed: 2, numRuns: 6000 })
      .filter((c) => c.endpoint.endsWith('(console)'));
    for (const c of cases.slice(0, 50)) {
      const wire = Buffer.concat(encodeCase(c, ctx).parts).toString('latin1');
      expect(wire).toMatch(/\nCookie: tollway_console=SESSION\.SIG\r?\n/);
      expect(wire).toMatch(/\nX-CSRF-Token: CSRF\r?\n/);
    }
    const broken = (c: (typeof cases)[number]) =>
      c.mutations.some((m) => /CSRF token broken|cross-site Origin/.test(m));
    const bearer = (c: (typeof cases)[number]) => c.headers.some(([name]) => name === 'Authorization');
    const newPath = (c: (typeof cases)[number]) => c.mutations.some((m) => m.startsWith('path segment'));
    const writes = cases.filter(
      (c) => broken(c) && !bearer(c) && !newPath(c) && !['GET', 'HEAD', 'OPTIONS'].includes(c.method),
    );
    expect(writes.length).toBeGreaterThan(2);
    for (const c of writes) expect(c.mustRefuse).toBe(true);
    // A safe method needs no token: a broken one alone does not make the request a refusal.
    const reads = cases.filter((c) => broken(c) && c.method === 'GET');
    expect(reads.length).toBeGreaterThan(0);
    for (const c of reads) expect(c.mustRefuse).toBe(false);
  });

  it("sends the other organization's standard key to the session service (which refuses admin keys outright)", () => {
    const cases = fc
      .sample(caseArbitrary('sessions'), { seed: 4, numRuns: 2000 })
      .filter((c) => c.endpoint.endsWith(ANOTHER_ORGANIZATION));
    expect(cases.length).toBeGreaterThan(20);
    for (const c of cases)
      expect(Buffer.concat(encodeCase(c, ctx).parts).toString('latin1')).toMatch(
        /\nAuthorization: Bearer TENANT-STANDARD\r?\n/,
      );
  });

  it("requires a refusal of every request of another organization's admin, unless its credentials or path were changed", () => {
    const cases = fc
      .sample(caseArbitrary('gateway'), { seed: 3, numRuns: 4000 })
      .filter((c) => c.endpoint.endsWith("(another organization's admin)"));
    expect(cases.length).toBeGreaterThan(20);
    for (const c of cases) {
      expect(Buffer.concat(encodeCase(c, ctx).parts).toString('latin1')).toMatch(/\nAuthorization: Bearer TENANT\r?\n/);
      const ownCredentials = c.headers.filter(([name]) => name === 'Authorization').length > 1;
      // Otherwise it may still be a refusal for what its body holds.
      const newPath = c.mutations.some((m) => m.startsWith('path segment'));
      if (!ownCredentials && !newPath && c.method !== 'OPTIONS') expect(c.mustRefuse).toBe(true);
    }
  });

  it('requires a refusal of an inference call whose organization key names another organization to bill', () => {
    const cases = fc.sample(caseArbitrary('gateway'), { seed: 5, numRuns: 8000 });
    const inference = cases.filter(
      (c) =>
        c.mutations.some((m) => m.includes('x-tollway-organization naming another')) && c.target.startsWith('/v1/'),
    );
    expect(inference.length).toBeGreaterThan(5);
    for (const c of inference) {
      expect(Buffer.concat(encodeCase(c, ctx).parts).toString('latin1')).toMatch(
        /\nX-Tollway-Organization: (org, )?victim\r?\n/,
      );
      const ownCredentials = c.headers.filter(([name]) => name === 'Authorization').length > 1;
      const newPath = c.mutations.some((m) => m.startsWith('path segment'));
      if (!ownCredentials && !newPath && c.method !== 'OPTIONS') expect(c.mustRefuse).toBe(true);
    }
  });

  it("adds a __proto__ key as a key on the wire, never as the body object's prototype", () => {
    const cases = fc
      .sample(caseArbitrary('sessions'), { seed: 1, numRuns: 2000 })
      .filter((c) => c.mutations.at(-1)?.startsWith('body.__proto__ added'))
      // A body sent as it is: not a raw whole body, not compressed.
      .filter((c) => !(c.body instanceof Uint8Array) && c.framing.kind === 'length')
      // A root that is a scalar node has no keys to add (Entries stays: it is what the old bug produced).
      .filter((c) => ![LongString, Deep, Repeat, RawToken, ByteString].some((kind) => c.body instanceof kind));
    expect(cases.length).toBeGreaterThan(0);
    const onTheWire = cases.filter((c) => Buffer.concat(encodeCase(c, ctx).parts).includes('"__proto__":'));
    expect(onTheWire.length).toBe(cases.length);
  });

  it('pipelines a request as whole framed copies in one write, only the last asking to close', () => {
    const [pipelined] = fc
      .sample(caseArbitrary('gateway'), { seed: 3, numRuns: 3000 })
      .filter((c) => c.framing.kind === 'pipelined' && c.framing.copies === 2 && c.method === 'POST')
      .filter((c) => c.body !== null && !c.mutations.some((m) => /header|head |HTTP|bare LF|Host/.test(m)));
    expect(pipelined).toBeDefined();
    const c = pipelined as NonNullable<typeof pipelined>;
    const request = encodeCase(c, ctx);
    expect(request.parts).toHaveLength(1);
    expect(request.finish).toBe('keep');
    const single = Buffer.concat(encodeCase({ ...c, framing: { kind: 'length' } }, ctx).parts).toString('latin1');
    const text = (request.parts[0] as Buffer).toString('latin1');
    expect(text.endsWith(single)).toBe(true);
    expect(text.split(`${c.method} `).length - 1).toBe(3);
    expect(text.match(/\r\nConnection: close\r\n/g)).toHaveLength(1);
    expect(text.match(/\r\nContent-Length: \d+\r\n/g)).toHaveLength(3);
  });

  it('is replayable: the same seed gives the same cases', () => {
    const a = fc.sample(caseArbitrary('sessions'), { seed: 42, numRuns: 50 });
    const b = fc.sample(caseArbitrary('sessions'), { seed: 42, numRuns: 50 });
    expect(a.map((c) => Buffer.concat(encodeCase(c, ctx).parts).toString('latin1'))).toEqual(
      b.map((c) => Buffer.concat(encodeCase(c, ctx).parts).toString('latin1')),
    );
  });
});
