import request from 'supertest';
import { readFileSync, readdirSync } from 'node:fs';
import { connect, type Socket } from 'node:net';
import path from 'node:path';
import { deleteOrganizationRecord } from '@tollway/accounts';
import { ConsoleSession } from '@tollway/contracts';
import { CONSOLE_CSP } from '../../src/console/console.router';
import { ADMIN_TOKEN, buildConsole, ROOMY_BUDGETS, startConsoleGateway, type ConsoleGateway } from './console-harness';

// The console's HTTP surface: static files and their headers, sign-in and the session cookie,
// CSRF, the failed sign-in limit, and how far an organization admin reaches in the admin API.
let gateway: ConsoleGateway;
let built: Awaited<ReturnType<typeof buildConsole>>;

beforeAll(async () => {
  built = await buildConsole();
  gateway = await startConsoleGateway({ CONSOLE_DIR: built.dir });
}, 60_000);

afterAll(async () => {
  await gateway.close();
  built.remove();
});

const operator = { Authorization: `Bearer ${ADMIN_TOKEN}` };

async function orgWithAdminKey(name: string) {
  const org = await gateway.store.createOrganization({ name, budgets: ROOMY_BUDGETS, credit: 5 });
  const admin = await gateway.store.createKey(org.id, 'admin', 'admin');
  const standard = await gateway.store.createKey(org.id, 'app');
  return { org, admin: admin!, standard: standard! };
}

/** Signs in with `token` (to this file's gateway unless told); returns the Cookie header value and the session. */
async function signIn(token: string, baseUrl = gateway.baseUrl) {
  const res = await request(baseUrl).post('/console/api/session').send({ token });
  expect(res.status).toBe(201);
  const setCookie = res.headers['set-cookie'] as unknown as string[];
  return { cookie: setCookie[0]!.split(';')[0]!, session: ConsoleSession.parse(res.body), setCookie: setCookie[0]! };
}

describe('static files', () => {
  it('serve index.html with the strict CSP, no inline script, and no caching of the page itself', async () => {
    const res = await request(gateway.baseUrl).get('/console/');
    expect(res.status).toBe(200);
    expect(res.headers['content-security-policy']).toBe(CONSOLE_CSP);
    expect(CONSOLE_CSP).toContain("script-src 'self'");
    expect(CONSOLE_CSP).not.toMatch(/unsafe-inline|unsafe-eval|https?:/);
    expect(res.headers['cache-control']).toBe('no-cache');
    expect(res.headers['x-frame-options']).toBe('DENY');
    const scripts = [...res.text.matchAll(/<script\b[^>]*>([\s\S]*?)<\/script>/g)];
    expect(scripts.length).toBeGreaterThan(0);
    for (const [tag, body] of scripts) {
      expect(tag).toMatch(/src="\/console\/assets\/[^"]+\.js"/);
      expect(body!.trim()).toBe('');
    }
    expect(res.text).not.toMatch(/https?:\/\//);
    expect((await request(gateway.baseUrl).get('/console')).headers.location).toBe('/console/');
    // The same page under its own name is not cached either.
    const named = await request(gateway.baseUrl).get('/console/index.html');
    expect([named.status, named.headers['cache-control'], named.text]).toEqual([200, 'no-cache', res.text]);
  });

  it('serve hashed assets with a year-long immutable cache, and reference no other origin', async () => {
    const assets = readdirSync(path.join(built.dir, 'assets'));
    expect(assets.some((name) => /\.js$/.test(name))).toBe(true);
    for (const name of assets) {
      const res = await request(gateway.baseUrl).get(`/console/assets/${name}`);
      expect(res.status).toBe(200);
      expect(res.headers['cache-control']).toBe('public, max-age=31536000, immutable');
      const text = readFileSync(path.join(built.dir, 'assets', name), 'utf8');
      // No font or stylesheet fetched from elsewhere (URLs in strings such as docs links are not loaded).
      expect(text).not.toMatch(/@import|fonts\.googleapis|url\(\s*['"]?https?:/);
    }
    expect((await request(gateway.baseUrl).get('/console/assets/missing-0000.js')).status).toBe(404);
  });

  it('answer a range past the end with 416 and a failed precondition with 412, not a 500', async () => {
    const asset = readdirSync(path.join(built.dir, 'assets'))[0]!;
    for (const file of ['/console/', '/console/index.html', `/console/assets/${asset}`]) {
      const range = await request(gateway.baseUrl).get(file).set('range', 'bytes=99999999-');
      expect([file, range.status]).toEqual([file, 416]);
      expect(range.headers['content-range']).toMatch(/^bytes \*\/\d+$/);
      for (const [name, value] of [
        ['if-match', '"nope"'],
        ['if-unmodified-since', 'Thu, 01 Jan 1970 00:00:00 GMT'],
      ] as const) {
        const failed = await request(gateway.baseUrl).get(file).set(name, value);
        expect([file, name, failed.status]).toEqual([file, name, 412]);
      }
      // A range that can be served still is.
      const part = await request(gateway.baseUrl).get(file).set('range', 'bytes=0-9');
      expect([file, part.status, part.headers['content-length']]).toEqual([file, 206, '10']);
    }
  });
});

describe('sign-in and the session cookie', () => {
  it('signs the operator in with a signed HttpOnly SameSite=Strict cookie that expires; not Secure over plain HTTP', async () => {
    const { cookie, session, setCookie } = await signIn(ADMIN_TOKEN);
    expect(session).toMatchObject({ role: 'operator', organization_id: null });
    expect(setCookie).toMatch(/^tollway_console=[A-Za-z0-9_-]{32}\.[A-Za-z0-9_-]{43};/);
    expect(setCookie).toMatch(/; HttpOnly/);
    expect(setCookie).toMatch(/; SameSite=Strict/);
    expect(setCookie).toMatch(/; Path=\//);
    expect(setCookie).toMatch(/; Max-Age=28800/);
    expect(setCookie).not.toMatch(/Secure/);
    const me = await request(gateway.baseUrl).get('/console/api/session').set('Cookie', cookie);
    expect(me.status).toBe(200);
    expect(me.headers['cache-control']).toBe('no-store');
    const orgs = await request(gateway.baseUrl).get('/admin/v1/organizations').set('Cookie', cookie);
    expect(orgs.status).toBe(200);
  });

  it('marks the cookie Secure with the __Host- prefix behind TLS', async () => {
    const res = await request(gateway.baseUrl)
      .post('/console/api/session')
      .set('X-Forwarded-Proto', 'https')
      .send({ token: ADMIN_TOKEN });
    const setCookie = (res.headers['set-cookie'] as unknown as string[])[0]!;
    expect(setCookie).toMatch(/^__Host-tollway_console=/);
    expect(setCookie).toMatch(/; Secure/);
  });

  it('over TLS reads only the __Host- cookie: an unprefixed one a sibling host planted signs no one in', async () => {
    const { org, admin } = await orgWithAdminKey('Planted');
    const { cookie: planted } = await signIn(admin.key);
    expect(planted).toMatch(/^tollway_console=/);
    const overTls = (path: string, cookie: string) =>
      request(gateway.baseUrl).get(path).set('X-Forwarded-Proto', 'https').set('Cookie', cookie);
    const keysPath = `/admin/v1/organizations/${org.id}/keys`;
    expect((await overTls('/console/api/session', planted)).status).toBe(401);
    expect((await overTls(keysPath, planted)).status).toBe(401);
    // The same session under the name only a secure origin can set is the browser's own.
    const own = await overTls('/console/api/session', `__Host-${planted}`);
    expect([own.status, own.body.organization_id]).toEqual([200, org.id]);
    expect((await overTls(keysPath, `__Host-${planted}`)).status).toBe(200);
    // And over plain HTTP the unprefixed name is the only one there is.
    expect((await request(gateway.baseUrl).get(keysPath).set('Cookie', planted)).status).toBe(200);
  });

  it('refuses a wrong token and an ordinary key (401, no code), and admits an organization admin key', async () => {
    const { org, admin, standard } = await orgWithAdminKey('Sign-in');
    for (const token of ['nope', standard.key, `${ADMIN_TOKEN}x`]) {
      const res = await request(gateway.baseUrl).post('/console/api/session').send({ token });
      expect(res.status).toBe(401);
      expect(res.body.error).not.toHaveProperty('code');
      expect(res.headers['set-cookie']).toBeUndefined();
    }
    const bad = await request(gateway.baseUrl).post('/console/api/session').send({ token: '' });
    expect(bad.status).toBe(400);
    expect(bad.body.error.param).toBe('token');
    const { session } = await signIn(admin.key);
    expect(session).toMatchObject({ role: 'organization_admin', organization_id: org.id });
  });

  it('reads the sign-in body with the hardened reader: a broken encoding or deep nesting is a 400 in the envelope', async () => {
    const notGzip = await request(gateway.baseUrl)
      .post('/console/api/session')
      .set('Content-Type', 'application/json')
      .set('Content-Encoding', 'gzip')
      .send(JSON.stringify({ token: ADMIN_TOKEN }));
    expect(notGzip.status).toBe(400);
    expect(notGzip.body).toMatchObject({ error: { type: 'invalid_request_error', code: 'invalid_json' } });
    const deep = await request(gateway.baseUrl)
      .post('/console/api/session')
      .set('Content-Type', 'application/json')
      .send(`{"token":${'['.repeat(100)}${']'.repeat(100)}}`);
    expect(deep.status).toBe(400);
    expect(deep.body).toMatchObject({ error: { code: 'invalid_json' } });
    expect(deep.headers['set-cookie']).toBeUndefined();
  });

  it('refuses a forged or altered cookie, and ends the session on sign-out', async () => {
    const { cookie, session } = await signIn(ADMIN_TOKEN);
    const [name, value] = cookie.split('=') as [string, string];
    const [id, signature] = value.split('.') as [string, string];
    const flipped = `${name}=${id.slice(0, -1)}${id.endsWith('A') ? 'B' : 'A'}.${signature}`;
    expect((await request(gateway.baseUrl).get('/admin/v1/organizations').set('Cookie', flipped)).status).toBe(401);
    const unsigned = `${name}=${id}`;
    expect((await request(gateway.baseUrl).get('/admin/v1/organizations').set('Cookie', unsigned)).status).toBe(401);

    const noCsrf = await request(gateway.baseUrl).delete('/console/api/session').set('Cookie', cookie);
    expect(noCsrf.status).toBe(403);
    const out = await request(gateway.baseUrl)
      .delete('/console/api/session')
      .set('Cookie', cookie)
      .set('x-csrf-token', session.csrf_token);
    expect(out.status).toBe(204);
    expect((out.headers['set-cookie'] as unknown as string[])[0]).toMatch(
      /^tollway_console=;.*Expires=Thu, 01 Jan 1970/,
    );
    expect((await request(gateway.baseUrl).get('/admin/v1/organizations').set('Cookie', cookie)).status).toBe(401);
    expect((await request(gateway.baseUrl).get('/console/api/session').set('Cookie', cookie)).status).toBe(401);
  });

  it('ends an organization admin session when its admin key is revoked', async () => {
    const { org, admin } = await orgWithAdminKey('Revoked admin');
    const { cookie } = await signIn(admin.key);
    expect(
      (await request(gateway.baseUrl).get(`/admin/v1/organizations/${org.id}/keys`).set('Cookie', cookie)).status,
    ).toBe(200);
    await request(gateway.baseUrl)
      .delete(`/admin/v1/organizations/${org.id}/keys/${admin.id}`)
      .set(operator)
      .expect(200);
    expect(
      (await request(gateway.baseUrl).get(`/admin/v1/organizations/${org.id}/keys`).set('Cookie', cookie)).status,
    ).toBe(401);
  });
});

describe('rotating ADMIN_TOKEN', () => {
  it('ends the operator sessions opened with the old token, even under the same CONSOLE_SESSION_SECRET', async () => {
    const secret = 'console-test-session-secret-kept-across-rotation';
    const rotated = `${ADMIN_TOKEN}-rotated`;
    const before = await startConsoleGateway({ CONSOLE_SESSION_SECRET: secret });
    // The same deployment restarted: once with the same token, once with a new one.
    const same = await startConsoleGateway({ CONSOLE_SESSION_SECRET: secret, REDIS_PREFIX: before.prefix });
    const after = await startConsoleGateway({
      CONSOLE_SESSION_SECRET: secret,
      REDIS_PREFIX: before.prefix,
      ADMIN_TOKEN: rotated,
    });
    try {
      const org = await before.store.createOrganization({ name: 'Kept', budgets: ROOMY_BUDGETS, credit: 5 });
      const admin = (await before.store.createKey(org.id, 'admin', 'admin'))!;
      const orgAdmin = await signIn(admin.key, before.baseUrl);
      const { cookie, session } = await signIn(ADMIN_TOKEN, before.baseUrl);
      const stored = await before.redis.get(`${before.prefix}console:session:${cookie.split(/[=.]/)[1]}`);
      expect(stored).toContain('"role":"operator"');
      expect(stored).not.toContain(ADMIN_TOKEN);
      const listOrgs = (baseUrl: string) => request(baseUrl).get('/admin/v1/organizations').set('Cookie', cookie);
      expect((await listOrgs(same.baseUrl)).status).toBe(200);

      expect((await request(after.baseUrl).get('/admin/v1/organizations').set(operator)).status).toBe(401);
      expect((await listOrgs(after.baseUrl)).status).toBe(401);
      const create = await request(after.baseUrl)
        .post('/admin/v1/organizations')
        .set('Cookie', cookie)
        .set('x-csrf-token', session.csrf_token)
        .send({ name: 'After rotation', budgets: ROOMY_BUDGETS });
      expect(create.status).toBe(401);
      expect((await request(after.baseUrl).get('/console/api/session').set('Cookie', cookie)).status).toBe(401);
      // An organization admin signed in with a key, not the token: their session goes on.
      const keys = await request(after.baseUrl)
        .get(`/admin/v1/organizations/${org.id}/keys`)
        .set('Cookie', orgAdmin.cookie);
      expect(keys.status).toBe(200);

      // A replica not yet restarted refuses the new token's session without ending it.
      const fresh = await signIn(rotated, after.baseUrl);
      const listWithFresh = (baseUrl: string) =>
        request(baseUrl).get('/admin/v1/organizations').set('Cookie', fresh.cookie);
      expect((await listWithFresh(before.baseUrl)).status).toBe(401);
      expect((await listWithFresh(after.baseUrl)).status).toBe(200);
    } finally {
      await after.close();
      await same.close();
      await before.close();
    }
  });
});

describe('an organization whose delete died after its first step', () => {
  it('leaves none of its keys working: sessions end, sign-in and every call is 401; the delete sent again finishes', async () => {
    const { org, admin, standard } = await orgWithAdminKey('Half deleted');
    const { cookie } = await signIn(admin.key);
    const models = () => request(gateway.baseUrl).get('/v1/models').set('Authorization', `Bearer ${standard.key}`);
    expect((await models()).status).toBe(200); // now cached by the gateway's authenticator
    // The delete's first step, and none of the revocations after it: the process was killed there.
    await deleteOrganizationRecord(gateway.redis, gateway.store.keys, org.id, Date.now());
    expect((await gateway.store.getKey(standard.id))?.revoked_at).toBeNull();

    let status = 200;
    for (let tries = 0; tries < 100 && status === 200; tries++) status = (await models()).status;
    expect(status).toBe(401);
    const keysPath = `/admin/v1/organizations/${org.id}/keys`;
    expect((await request(gateway.baseUrl).get(keysPath).set('Cookie', cookie)).status).toBe(401);
    expect((await request(gateway.baseUrl).get(keysPath).set('Authorization', `Bearer ${admin.key}`)).status).toBe(401);
    expect((await request(gateway.baseUrl).post('/console/api/session').send({ token: admin.key })).status).toBe(401);

    // Retried, the delete revokes what is left and answers as a delete; once done, 404.
    const deleteOrg = () => request(gateway.baseUrl).delete(`/admin/v1/organizations/${org.id}`).set(operator);
    expect((await deleteOrg()).status).toBe(200);
    expect(await gateway.store.getKey(standard.id)).toBeNull();
    expect((await deleteOrg()).status).toBe(404);
  });
});

describe('CSRF', () => {
  it('requires the session token and this origin on cookie-borne changes; bearer calls need neither', async () => {
    const { org } = await orgWithAdminKey('Csrf');
    const { cookie, session } = await signIn(ADMIN_TOKEN);
    const create = () => request(gateway.baseUrl).post(`/admin/v1/organizations/${org.id}/keys`).set('Cookie', cookie);
    const missing = await create().send({ name: 'x' });
    expect(missing.status).toBe(403);
    expect(missing.body.error.code).toBe('csrf_failed');
    expect((await create().set('x-csrf-token', 'wrong').send({ name: 'x' })).status).toBe(403);
    const crossSite = await create()
      .set('x-csrf-token', session.csrf_token)
      .set('Origin', 'https://evil.example')
      .send({ name: 'x' });
    expect(crossSite.status).toBe(403);
    // Another session's token is no good either.
    const other = await signIn(ADMIN_TOKEN);
    expect((await create().set('x-csrf-token', other.session.csrf_token).send({ name: 'x' })).status).toBe(403);
    const ok = await create()
      .set('x-csrf-token', session.csrf_token)
      .set('Origin', gateway.baseUrl)
      .send({ name: 'x' });
    expect(ok.status).toBe(201);
    expect(
      (await request(gateway.baseUrl).get(`/admin/v1/organizations/${org.id}/keys`).set('Cookie', cookie)).status,
    ).toBe(200);
    expect(
      (await request(gateway.baseUrl).post(`/admin/v1/organizations/${org.id}/keys`).set(operator).send({})).status,
    ).toBe(201);
    const crossSiteSignIn = await request(gateway.baseUrl)
      .post('/console/api/session')
      .set('Origin', 'https://evil.example')
      .send({ token: ADMIN_TOKEN });
    expect(crossSiteSignIn.status).toBe(403);
  });
});

describe('an organization admin in the admin API', () => {
  it('reaches its own keys and usage, and nothing of another organization or operator-only', async () => {
    const mine = await orgWithAdminKey('Mine');
    const theirs = await orgWithAdminKey('Theirs');
    const { cookie, session } = await signIn(mine.admin.key);
    const asBearer = { Authorization: `Bearer ${mine.admin.key}` };
    const asCookie = { Cookie: cookie, 'x-csrf-token': session.csrf_token };
    for (const creds of [asBearer, asCookie]) {
      const api = request(gateway.baseUrl);
      const own = await api.get(`/admin/v1/organizations/${mine.org.id}/keys`).set(creds);
      expect(own.status).toBe(200);
      expect(own.body.data.map((k: { organization_id: string }) => k.organization_id)).toEqual(
        own.body.data.map(() => mine.org.id),
      );
      expect((await api.get(`/admin/v1/organizations/${mine.org.id}/usage`).set(creds)).status).toBe(200);
      expect((await api.get(`/admin/v1/organizations/${mine.org.id}`).set(creds)).status).toBe(200);
      expect((await api.get('/admin/v1/models').set(creds)).status).toBe(200);
      const created = await api.post(`/admin/v1/organizations/${mine.org.id}/keys`).set(creds).send({ name: 'ci' });
      expect(created.status).toBe(201);

      const elsewhere = [
        api.get(`/admin/v1/organizations/${theirs.org.id}`).set(creds),
        api.get(`/admin/v1/organizations/${theirs.org.id}/keys`).set(creds),
        api.get(`/admin/v1/organizations/${theirs.org.id}/usage`).set(creds),
        api.post(`/admin/v1/organizations/${theirs.org.id}/keys`).set(creds).send({}),
        api.delete(`/admin/v1/organizations/${theirs.org.id}/keys/${theirs.standard.id}`).set(creds),
        api.patch(`/admin/v1/organizations/${theirs.org.id}`).set(creds).send({ credit_top_up: 100 }),
        api.delete(`/admin/v1/organizations/${theirs.org.id}`).set(creds),
      ];
      for (const res of await Promise.all(elsewhere)) {
        expect(res.status).toBe(404);
        expect(res.body.error.code).toBe('organization_not_found');
      }
      // Their key through my organization's path is not mine either.
      const crossKey = await api.delete(`/admin/v1/organizations/${mine.org.id}/keys/${theirs.standard.id}`).set(creds);
      expect(crossKey.status).toBe(404);

      const operatorOnly = [
        api.get('/admin/v1/organizations').set(creds),
        api.post('/admin/v1/organizations').set(creds).send({ name: 'x', budgets: ROOMY_BUDGETS }),
        api.patch(`/admin/v1/organizations/${mine.org.id}`).set(creds).send({ credit_top_up: 100 }),
        api
          .patch(`/admin/v1/organizations/${mine.org.id}`)
          .set(creds)
          .send({ budgets: { requests: 1e9 } }),
        api.delete(`/admin/v1/organizations/${mine.org.id}`).set(creds),
      ];
      for (const res of await Promise.all(operatorOnly)) {
        expect(res.status).toBe(403);
        expect(res.body.error.code).toBe('permission_denied');
      }
    }
    const after = await gateway.store.getOrganization(theirs.org.id);
    expect(after?.credit).toBe(5);
    expect((await gateway.store.getOrganization(mine.org.id))?.credit).toBe(5);
    expect((await gateway.store.listKeys(theirs.org.id))?.every((k) => k.revoked_at === null)).toBe(true);
  });

  it('cannot call the inference API with an admin key, and an ordinary key cannot call the admin API', async () => {
    const { admin, standard, org } = await orgWithAdminKey('Separation');
    const models = await request(gateway.baseUrl).get('/v1/models').set('Authorization', `Bearer ${admin.key}`);
    expect(models.status).toBe(401);
    const chat = await request(gateway.baseUrl)
      .post('/v1/chat/completions')
      .set('Authorization', `Bearer ${admin.key}`)
      .send({ model: 'tollway/sim-chat', messages: [{ role: 'user', content: 'hi' }] });
    expect(chat.status).toBe(401);
    expect(
      (await request(gateway.baseUrl).get('/v1/models').set('Authorization', `Bearer ${standard.key}`)).status,
    ).toBe(200);
    const keys = await request(gateway.baseUrl)
      .get(`/admin/v1/organizations/${org.id}/keys`)
      .set('Authorization', `Bearer ${standard.key}`);
    expect(keys.status).toBe(401);
  });
});

/**
 * Sends one sign-in per token, each on a connection of its own, all written in the same turn once
 * every connection is open, so the gateway has them all at once; resolves their statuses.
 */
async function simultaneousSignIns(baseUrl: string, tokens: string[]): Promise<number[]> {
  const { hostname, port } = new URL(baseUrl);
  const sockets = await Promise.all(
    tokens.map(
      () =>
        new Promise<Socket>((resolve, reject) => {
          const socket = connect(Number(port), hostname, () => resolve(socket));
          socket.on('error', reject);
        }),
    ),
  );
  const answers = sockets.map(
    (socket) =>
      new Promise<number>((resolve) => {
        let head = '';
        socket.on('data', (data: Buffer) => {
          head += data.toString('latin1');
          const status = /^HTTP\/1\.1 (\d{3})/.exec(head);
          if (status) {
            resolve(Number(status[1]));
            socket.destroy();
          }
        });
      }),
  );
  tokens.forEach((token, i) => {
    const body = JSON.stringify({ token });
    sockets[i]?.write(
      `POST /console/api/session HTTP/1.1\r\nHost: ${hostname}:${port}\r\ncontent-type: application/json\r\n` +
        `content-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
    );
  });
  return Promise.all(answers);
}

describe('failed sign-ins', () => {
  it('are limited per address: after the limit even the right token waits, with retry-after', async () => {
    const limited = await startConsoleGateway({
      CONSOLE_SIGN_IN_MAX_FAILURES: '3',
      CONSOLE_SIGN_IN_WINDOW_MS: '60000',
    });
    try {
      const attempt = (token: string) => request(limited.baseUrl).post('/console/api/session').send({ token });
      expect((await attempt(ADMIN_TOKEN)).status).toBe(201);
      for (let i = 0; i < 3; i++) expect((await attempt(`wrong-${i}`)).status).toBe(401);
      const refused = await attempt(ADMIN_TOKEN);
      expect(refused.status).toBe(429);
      expect(refused.body.error.code).toBe('rate_limit_exceeded');
      expect(Number(refused.headers['retry-after'])).toBeGreaterThan(0);
      expect(Number(refused.headers['retry-after'])).toBeLessThanOrEqual(60);
      // The limit lives in Redis, so every replica sees it.
      const ttl = await limited.redis.pttl(`${limited.prefix}console:sign-in-failures:127.0.0.1`);
      expect(ttl).toBeGreaterThan(0);
    } finally {
      await limited.close();
    }
  });

  it('answer no more than the limit of guesses sent all at once with 401, and a success costs nothing', async () => {
    const limited = await startConsoleGateway({
      CONSOLE_SIGN_IN_MAX_FAILURES: '5',
      CONSOLE_SIGN_IN_WINDOW_MS: '60000',
    });
    try {
      const attempt = (token: string) => request(limited.baseUrl).post('/console/api/session').send({ token });
      for (let i = 0; i < 8; i++) expect((await attempt(ADMIN_TOKEN)).status).toBe(201);
      const statuses = await simultaneousSignIns(
        limited.baseUrl,
        Array.from({ length: 40 }, (_, i) => `wrong-${i}`),
      );
      expect(statuses.filter((status) => status === 401)).toHaveLength(5);
      expect(statuses.filter((status) => status === 429)).toHaveLength(35);
      expect((await attempt(ADMIN_TOKEN)).status).toBe(429);
    } finally {
      await limited.close();
    }
  });
});
