import request from 'supertest';
import { createLogger } from '@tollway/service-kit';
import { startSessionSweeper } from '../../src/store/session-sweeper';
import { deleteKeys, keysUnder, startReplica, testPrefix, type ApiReplica } from './api-harness';

const prefix = testPrefix();
let now = 1_700_000_000_000;
const clock = () => now;
let capped: ApiReplica;
let timed: ApiReplica;

beforeAll(async () => {
  capped = await startReplica(`${prefix}cap:`, { maxSessions: 10, allowCustomIds: true });
  timed = await startReplica(`${prefix}ttl:`, { clock });
});

afterAll(async () => {
  await Promise.all([capped.close(), timed.close()]);
  await deleteKeys(prefix);
});

describe('--max-sessions under concurrency', () => {
  it('never overshoots the cap with concurrent POSTs and PUTs', async () => {
    const posts = Array.from({ length: 30 }, () =>
      request(capped.app)
        .post('/sessions')
        .then((res) => res.status),
    );
    const puts = Array.from({ length: 10 }, (_, i) =>
      request(capped.app)
        .put(`/sessions/00000000-0000-4000-8000-0000000000${String(i).padStart(2, '0')}`)
        .then((res) => res.status),
    );
    const statuses = await Promise.all([...posts, ...puts]);
    expect(statuses.filter((s) => s === 201)).toHaveLength(10);
    expect(statuses.filter((s) => s === 503)).toHaveLength(30);
    expect(await capped.store.count()).toBe(10);
    expect((await request(capped.app).get('/health')).body.total_sessions).toBe(10);
  });

  it('frees a slot on delete', async () => {
    const [first] = (await request(capped.app).get('/sessions')).body as Array<{ session_id: string }>;
    expect((await request(capped.app).delete(`/sessions/${first!.session_id}`)).status).toBe(204);
    expect((await request(capped.app).post('/sessions')).status).toBe(201);
    expect((await request(capped.app).post('/sessions')).status).toBe(503);
  });
});

describe('TTL sweep', () => {
  it('removes idle and errored sessions past the TTL, keeps running and recent ones, leaves no orphan keys', async () => {
    const ttlMs = 60_000;
    const create = async () =>
      (
        await request(timed.app)
          .post('/sessions')
          .send({ state: [{ role: 'user', content: 'x' }] })
      ).body.session_id as string;
    const idle = await create();
    const errored = await create();
    const running = await create();
    expect((await request(timed.app).post(`/sessions/${errored}/messages`).send({ content: 'q' })).status).toBe(202);
    const turnId = (await timed.store.get(errored, null))?.turnId ?? '';
    await timed.store.finishTurn(errored, turnId, { kind: 'error', error: 'x' });
    expect((await request(timed.app).post(`/sessions/${running}/messages`).send({ content: 'q' })).status).toBe(202);

    now += ttlMs - 1;
    const recent = await create();
    expect(await timed.store.sweepExpired(ttlMs)).toBe(0);

    now += 1;
    expect(await timed.store.sweepExpired(ttlMs)).toBe(2);
    for (const id of [idle, errored]) expect((await request(timed.app).get(`/sessions/${id}`)).status).toBe(404);
    expect((await request(timed.app).get(`/sessions/${running}`)).body.status).toBe('running');
    expect((await request(timed.app).get(`/sessions/${recent}`)).body.status).toBe('idle');
    expect(await timed.store.count()).toBe(2);
    expect(
      ((await request(timed.app).get('/sessions')).body as Array<{ session_id: string }>)
        .map((s) => s.session_id)
        .sort(),
    ).toEqual([running, recent].sort());

    // Running sessions are never swept, however old; activity restarts when the turn ends.
    now += 10 * ttlMs;
    expect(await timed.store.sweepExpired(ttlMs)).toBe(1);
    expect((await request(timed.app).get(`/sessions/${running}`)).status).toBe(200);

    const keys = (await keysUnder(timed.redis, `${prefix}ttl:{sessions}`)).map((key) =>
      key.slice(`${prefix}ttl:{sessions}:`.length),
    );
    // The running session (in the activity index at the running score) and its turn, which still
    // waits: its queue, its organization's scheduler entry, the ready set and a wake token.
    expect(keys.sort()).toEqual(
      [`h:${running}`, 'no-org', 'activity', `s:${running}`, 'q:', 'ready', 'sched:', 'wake'].sort(),
    );
  });

  it('a sweeper on a short real interval removes an expired session by itself', async () => {
    const id = (await request(timed.app).post('/sessions')).body.session_id as string;
    now += 5_000;
    const sweeper = startSessionSweeper(timed.store, 1_000, 20, createLogger({ service: 'test', silent: true }));
    try {
      for (let i = 0; i < 100 && (await request(timed.app).get(`/sessions/${id}`)).status === 200; i++) {
        await new Promise((r) => setTimeout(r, 20));
      }
      expect((await request(timed.app).get(`/sessions/${id}`)).status).toBe(404);
    } finally {
      await sweeper.stop();
    }
  });
});
