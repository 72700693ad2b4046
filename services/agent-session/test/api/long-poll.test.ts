import { randomUUID } from 'node:crypto';
import { once } from 'node:events';
import http from 'node:http';
import { connect } from 'node:net';
import request from 'supertest';
import { Redis } from 'ioredis';
import { sessionEventsChannel } from '../../src/store/session-store';
import { replicaEventsChannel } from '../../src/store/session-keys';
import { END_ANSWER_MS } from '../../src/store/session-event-hub';
import { deleteKeys, serve, startReplica, testPrefix, type ApiReplica } from './api-harness';

const prefix = testPrefix();
let a: ApiReplica;
let b: ApiReplica;
let server: Awaited<ReturnType<typeof serve>>;

/** How far replica a's hub clock runs ahead (how old the turn ends it holds seem). */
let skew = 0;

/** Replica a's access log lines. */
const logged: Array<Record<string, unknown>> = [];

beforeAll(async () => {
  // Two replicas with their own connections and hubs: waits on one, turns end through the other.
  a = await startReplica(prefix, {
    accessLog: { info: (_message, fields) => logged.push(fields) },
    hubClock: () => Date.now() + skew,
  });
  b = await startReplica(prefix);
  server = await serve(a.app);
});

afterAll(async () => {
  await server.close();
  await Promise.all([a.close(), b.close()]);
  await deleteKeys(prefix);
});

/** A session whose turn replica a accepted and b ended; its end has reached a. */
async function endedOnA(content: string): Promise<{ id: string; reply: { role: 'assistant'; content: string } }> {
  const { id, turnId } = await runningSession();
  const reply = { role: 'assistant' as const, content };
  expect(await b.store.finishTurn(id, turnId, { kind: 'success', append: [reply], response: reply })).toBe('applied');
  for (let i = 0; i < 200 && !a.hub.endedHere(id, null); i++) await new Promise((r) => setTimeout(r, 5));
  expect(a.hub.endedHere(id, null)).toBe(true);
  return { id, reply };
}

async function runningSession(): Promise<{ id: string; turnId: string }> {
  const id = (await request(a.app).post('/sessions')).body.session_id as string;
  expect((await request(a.app).post(`/sessions/${id}/messages`).send({ content: 'q' })).status).toBe(202);
  return { id, turnId: (await b.store.get(id, null))?.turnId ?? '' };
}

/** Resolves once `count` waiters are registered on replica a's hub. */
// supertest sends a request only once `.then` is called, so pending requests are started with `.then`.
async function waitersRegistered(count: number): Promise<void> {
  for (let i = 0; i < 200 && a.hub.size < count; i++) await new Promise((r) => setTimeout(r, 5));
  expect(a.hub.size).toBe(count);
}

describe('GET /sessions/{id}?wait=true', () => {
  it('wakes within milliseconds of a success on another replica: 200 idle with the response', async () => {
    const { id, turnId } = await runningSession();
    const pending = request(server.url)
      .get(`/sessions/${id}?wait=true&timeout=10`)
      .then((res) => ({ res, at: Date.now() }));
    await waitersRegistered(1);
    const reply = { role: 'assistant' as const, content: 'done' };
    const finishedAt = Date.now();
    expect(await b.store.finishTurn(id, turnId, { kind: 'success', append: [reply], response: reply })).toBe('applied');
    const { res, at } = await pending;
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ session_id: id, status: 'idle', response: reply, error: null });
    expect(at - finishedAt).toBeLessThan(250);
    expect(a.hub.size).toBe(0);
  });

  it('answers 200 error when the agent fails', async () => {
    const { id, turnId } = await runningSession();
    const pending = request(server.url)
      .get(`/sessions/${id}?wait=true`)
      .then((res) => res);
    await waitersRegistered(1);
    await b.store.finishTurn(id, turnId, { kind: 'error', error: 'boom' });
    const res = await pending;
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ session_id: id, status: 'error', response: null, error: 'boom' });
  });

  it("ignores a late event of an earlier turn and answers with this turn's outcome", async () => {
    const { id, turnId } = await runningSession();
    const pending = request(server.url)
      .get(`/sessions/${id}?wait=true&timeout=10`)
      .then((res) => res);
    await waitersRegistered(1);
    const stale = {
      session_id: id,
      turn_id: 'an-earlier-turn',
      status: 'idle',
      response: '{"role":"assistant","content":"old"}',
    };
    await b.redis.publish(sessionEventsChannel(prefix), JSON.stringify(stale));
    await new Promise((r) => setTimeout(r, 50));
    expect(a.hub.size).toBe(1);
    await b.store.finishTurn(id, turnId, { kind: 'error', error: 'current' });
    expect((await pending).body).toEqual({ session_id: id, status: 'error', response: null, error: 'current' });
  });

  it('answers 200 running when the timeout passes first', async () => {
    const { id } = await runningSession();
    const started = Date.now();
    const res = await request(server.url).get(`/sessions/${id}?wait=true&timeout=0.2`);
    expect(res.status).toBe(200);
    expect(res.body.status).toBe('running');
    expect(Date.now() - started).toBeGreaterThanOrEqual(190);
    expect(a.hub.size).toBe(0);
  });

  it('logs a wait its client gave up on: status 499, error_type client_gone, and the waiter is gone', async () => {
    const { id } = await runningSession();
    const before = logged.length;
    await expect(
      fetch(`${server.url}/sessions/${id}?wait=true`, { signal: AbortSignal.timeout(200) }),
    ).rejects.toThrow();
    for (let i = 0; i < 100 && logged.length === before; i++) await new Promise((r) => setTimeout(r, 10));
    expect(logged.slice(before)).toEqual([
      expect.objectContaining({ method: 'GET', route: '/sessions/:sessionId', status: 499, error_type: 'client_gone' }),
    ]);
    for (let i = 0; i < 100 && a.hub.size > 0; i++) await new Promise((r) => setTimeout(r, 10));
    expect(a.hub.size).toBe(0);
  });

  it('answers 404 when the session is deleted during the wait (from another replica)', async () => {
    const { id } = await runningSession();
    const pending = request(server.url)
      .get(`/sessions/${id}?wait=1&timeout=10`)
      .then((res) => res);
    await waitersRegistered(1);
    expect((await request(b.app).delete(`/sessions/${id}`)).status).toBe(204);
    const res = await pending;
    expect(res.status).toBe(404);
    expect(res.body.error.code).toBe('session_not_found');
  });

  it('returns at once when not running, and 404 for a missing session', async () => {
    const id = (await request(a.app).post('/sessions')).body.session_id as string;
    expect((await request(a.app).get(`/sessions/${id}?wait=true`)).body.status).toBe('idle');
    expect((await request(a.app).get('/sessions/6f1c9a52-3a55-4d7a-9d0e-0a5f1b2c3d4e?wait=true')).status).toBe(404);
  });

  it('does not block without wait=true, even with a timeout', async () => {
    const { id } = await runningSession();
    const started = Date.now();
    const res = await request(a.app).get(`/sessions/${id}?wait=false&timeout=5`);
    expect(res.body.status).toBe('running');
    expect(Date.now() - started).toBeLessThan(1000);
  });

  it.each([
    ['wait=maybe'],
    ['wait=true&timeout=soon'],
    ['wait=true&timeout=-1'],
    ['wait=true&wait=false'],
    ['wait=true&timeout='],
    ['wait=true&timeout=%20'],
    ['wait=true&timeout=0x10'],
  ])('refuses %s with 400', async (query) => {
    const { id } = await runningSession();
    const res = await request(a.app).get(`/sessions/${id}?${query}`);
    expect(res.status).toBe(400);
    expect(res.body.error.code).toBe('invalid_request');
  });

  it('frees the waiter of a client that disconnects mid-wait', async () => {
    const { id } = await runningSession();
    const req = http.get(`${server.url}/sessions/${id}?wait=true`);
    req.on('error', () => undefined);
    await waitersRegistered(1);
    req.destroy();
    for (let i = 0; i < 200 && a.hub.size > 0; i++) await new Promise((r) => setTimeout(r, 5));
    expect(a.hub.size).toBe(0);
  });

  it('frees the waiters of a client that pipelined two long-polls and left, the queued one too', async () => {
    // The second answer waits behind the first: node gives it no 'close' of its own until the
    // first is finished, so only the connection's close tells that its client has gone.
    const { id } = await runningSession();
    const socket = connect(Number(new URL(server.url).port), '127.0.0.1');
    socket.on('error', () => undefined);
    await once(socket, 'connect');
    const poll = `GET /sessions/${id}?wait=true HTTP/1.1\r\nHost: x\r\n\r\n`;
    socket.write(poll + poll);
    await waitersRegistered(2);
    socket.destroy();
    for (let i = 0; i < 200 && a.hub.size > 0; i++) await new Promise((r) => setTimeout(r, 5));
    expect(a.hub.size).toBe(0);
  });

  it('serves many concurrent waiters on one subscriber connection and wakes them all', async () => {
    const sessions = await Promise.all(Array.from({ length: 50 }, () => runningSession()));
    const agent = new http.Agent({ keepAlive: true, maxSockets: 100 });
    const pending = sessions.map(({ id }) =>
      request(server.url)
        .get(`/sessions/${id}?wait=true&timeout=10`)
        .agent(agent)
        .then((res) => res),
    );
    await waitersRegistered(50);
    const clients = ((await b.redis.client('LIST')) as string)
      .split('\n')
      .filter((line) => line.includes(a.connectionTag));
    await Promise.all(sessions.map(({ id, turnId }) => b.store.finishTurn(id, turnId, { kind: 'error', error: 'x' })));
    const results = await Promise.all(pending);
    expect(results.every((res) => res.status === 200 && res.body.status === 'error')).toBe(true);
    // 50 waiters, and still only the replica's own two connections (api, events).
    expect(clients).toHaveLength(2);
    agent.destroy();
  });
});

describe("a turn's end reaches the replicas that wait on it, not every replica", () => {
  /** Every message on the shared channel and on each replica's own, by channel, for `id`. */
  async function listen(id: string): Promise<{ heard: Map<string, number>; stop: () => void }> {
    const subscriber = new Redis('redis://127.0.0.1:6379');
    const heard = new Map<string, number>();
    const channels = [
      sessionEventsChannel(prefix),
      ...[a, b].map((r) => replicaEventsChannel(prefix, r.hub.replicaId)),
    ];
    subscriber.on('message', (channel: string, message: string) => {
      if ((JSON.parse(message) as { session_id: string }).session_id === id)
        heard.set(channel, (heard.get(channel) ?? 0) + 1);
    });
    await subscriber.subscribe(...channels);
    return { heard, stop: () => subscriber.disconnect() };
  }

  /** Starts a turn on session `id` as an API replica of an earlier build did: registering no replica. */
  async function startUnregistered(id: string, content = 'q'): Promise<string> {
    const turnId = randomUUID();
    const job = JSON.stringify({ session_id: id, turn_id: turnId, org_id: null, message: {}, accepted_at: 1 });
    const limits = { maxHistoryBytes: 1 << 20, maxRunningTurns: 0, maxWaitingTurns: 0, weight: 1 };
    const started = await b.store.startTurn(id, null, { turnId, message: { role: 'user', content }, job }, limits);
    expect(started.result).toBe('ok');
    return turnId;
  }

  /** Ends `turnId` in error and says on which channels its end was heard. */
  async function heardOfEnd(id: string, turnId: string): Promise<Record<string, number>> {
    const { heard, stop } = await listen(id);
    try {
      expect(await b.store.finishTurn(id, turnId, { kind: 'error', error: 'boom' })).toBe('applied');
      await new Promise((resolve) => setTimeout(resolve, 100));
      return Object.fromEntries(heard);
    } finally {
      stop();
    }
  }

  const newSession = async () => (await request(a.app).post('/sessions')).body.session_id as string;

  it('publishes on the channel of the replica whose long-poll waits only, then nowhere once none waits', async () => {
    const id = await newSession();
    const turnId = await startUnregistered(id);
    const pending = request(server.url)
      .get(`/sessions/${id}?wait=true&timeout=10`)
      .then((res) => res);
    await waitersRegistered(1);
    expect(await heardOfEnd(id, turnId)).toEqual({ [replicaEventsChannel(prefix, a.hub.replicaId)]: 1 });
    expect((await pending).body.status).toBe('error');
    // The next turn, started without a replica and with no long-poll on it: its end is published nowhere.
    expect(await heardOfEnd(id, await startUnregistered(id, 'q2'))).toEqual({});
  });

  it('publishes on the channel of the replica that accepted the send, though no long-poll came', async () => {
    const { id, turnId } = await runningSession();
    expect(await heardOfEnd(id, turnId)).toEqual({ [replicaEventsChannel(prefix, a.hub.replicaId)]: 1 });
  });

  it('publishes on the shared channel for a session no replica of this build registered on (turns queued before an upgrade)', async () => {
    // A long-poll of an earlier build reads without registering, and listens on the shared channel.
    const id = await newSession();
    expect(await heardOfEnd(id, await startUnregistered(id))).toEqual({ [sessionEventsChannel(prefix)]: 1 });
  });

  it('registers each waiting replica once, and wakes long-polls on both', async () => {
    const { id, turnId } = await runningSession();
    const { heard, stop } = await listen(id);
    const serverB = await serve(b.app);
    try {
      const waits = [server.url, server.url, serverB.url].map((url) =>
        request(url)
          .get(`/sessions/${id}?wait=true&timeout=10`)
          .then((res) => res),
      );
      for (let i = 0; i < 200 && (a.hub.size < 2 || b.hub.size < 1); i++) await new Promise((r) => setTimeout(r, 5));
      const expected = `${a.hub.replicaId} ${b.hub.replicaId}`;
      let waiters: string | null = null;
      for (let i = 0; i < 200 && waiters !== expected; i++) {
        waiters = await a.redis.hget(`${prefix}{sessions}:s:${id}`, 'waiters');
        if (waiters !== expected) await new Promise((r) => setTimeout(r, 5));
      }
      expect(waiters).toBe(expected);
      expect(await b.store.finishTurn(id, turnId, { kind: 'error', error: 'boom' })).toBe('applied');
      for (const res of await Promise.all(waits)) expect(res.body).toMatchObject({ status: 'error', error: 'boom' });
      expect(Object.fromEntries(heard)).toEqual({
        [replicaEventsChannel(prefix, a.hub.replicaId)]: 1,
        [replicaEventsChannel(prefix, b.hub.replicaId)]: 1,
      });
    } finally {
      stop();
      await serverB.close();
    }
  });
});

describe('a long-poll on the replica that accepted the send', () => {
  it('waits for the turn without reading the session, and answers with its end', async () => {
    const id = (await request(a.app).post('/sessions')).body.session_id as string;
    expect((await request(a.app).post(`/sessions/${id}/messages`).send({ content: 'q' })).status).toBe(202);
    const turnId = (await b.store.get(id, null))?.turnId ?? '';
    const reads = jest.spyOn(a.store, 'getWatched');
    try {
      const pending = request(server.url)
        .get(`/sessions/${id}?wait=true&timeout=10`)
        .then((res) => res);
      await waitersRegistered(1);
      const reply = { role: 'assistant' as const, content: 'done' };
      expect(await b.store.finishTurn(id, turnId, { kind: 'success', append: [reply], response: reply })).toBe(
        'applied',
      );
      expect((await pending).body).toEqual({ session_id: id, status: 'idle', response: reply, error: null });
      expect(reads).not.toHaveBeenCalled();
      // Once ended here, the next long-poll is answered from the end (it just arrived), reading nothing.
      const plain = jest.spyOn(a.store, 'get');
      try {
        expect((await request(server.url).get(`/sessions/${id}?wait=true&timeout=10`)).body).toEqual({
          session_id: id,
          status: 'idle',
          response: reply,
          error: null,
        });
        expect(plain).not.toHaveBeenCalled();
        expect(reads).not.toHaveBeenCalled();
      } finally {
        plain.mockRestore();
      }
    } finally {
      reads.mockRestore();
    }
  });

  it('answers from the end that overtook the long-poll, and reads once it is older than END_ANSWER_MS', async () => {
    const { id, reply } = await endedOnA('first');
    const plain = jest.spyOn(a.store, 'get');
    const reads = jest.spyOn(a.store, 'getWatched');
    try {
      const res = await request(server.url).get(`/sessions/${id}?wait=true&timeout=10`);
      expect(res.body).toEqual({ session_id: id, status: 'idle', response: reply, error: null });
      expect([plain.mock.calls.length, reads.mock.calls.length]).toEqual([0, 0]);
      // Later, the end is a hint: a plain read answers, with nothing registered.
      skew = END_ANSWER_MS + 1;
      const later = await request(server.url).get(`/sessions/${id}?wait=true&timeout=10`);
      expect(later.body).toEqual({ session_id: id, status: 'idle', response: reply, error: null });
      expect([plain.mock.calls.length, reads.mock.calls.length]).toEqual([1, 0]);
      expect(await a.redis.hget(`${prefix}{sessions}:s:${id}`, 'waiters')).toBe('');
    } finally {
      skew = 0;
      plain.mockRestore();
      reads.mockRestore();
    }
  });

  it('reads, and waits, when another replica started a turn since the end it holds', async () => {
    const { id, reply } = await endedOnA('first');
    expect(a.hub.recentEnd(id, null)).not.toBeNull();
    const reads = jest.spyOn(a.store, 'getWatched');
    try {
      // Replica b's send tells a (the replica of the session's previous send) of the new turn.
      expect((await request(b.app).post(`/sessions/${id}/messages`).send({ content: 'again' })).status).toBe(202);
      const second = (await b.store.get(id, null))?.turnId ?? '';
      const pending = request(server.url)
        .get(`/sessions/${id}?wait=true&timeout=10`)
        .then((r) => r);
      await waitersRegistered(1);
      for (let i = 0; i < 200 && reads.mock.calls.length < 1; i++) await new Promise((r) => setTimeout(r, 5));
      expect(reads).toHaveBeenCalledTimes(1);
      expect((await a.redis.hget(`${prefix}{sessions}:s:${id}`, 'waiters'))?.split(' ')).toContain(a.hub.replicaId);
      expect(await b.store.finishTurn(id, second, { kind: 'error', error: 'boom' })).toBe('applied');
      expect((await pending).body).toEqual({ session_id: id, status: 'error', response: reply, error: 'boom' });
      expect(await a.redis.hget(`${prefix}{sessions}:s:${id}`, 'sent_on')).toBe(b.hub.replicaId);
    } finally {
      reads.mockRestore();
    }
  });

  it('answers nothing from the end it holds once a send of its own may have run', async () => {
    const { id } = await endedOnA('first');
    // The send's script runs, but its reply is lost (a timeout): the session runs a turn nobody noted.
    const startTurn = a.store.startTurn.bind(a.store);
    const lost = jest.spyOn(a.store, 'startTurn').mockImplementationOnce(async (...args) => {
      await startTurn(...args);
      throw new Error('Command timed out');
    });
    try {
      expect(
        (await request(a.app).post(`/sessions/${id}/messages`).send({ content: 'again' })).status,
      ).toBeGreaterThanOrEqual(500);
    } finally {
      lost.mockRestore();
    }
    const res = await request(server.url).get(`/sessions/${id}?wait=true&timeout=0.2`);
    expect(res.body).toMatchObject({ session_id: id, status: 'running' });
  });

  it("reads for another organization's key, and answers 404", async () => {
    const id = (await request(a.app).post('/sessions')).body.session_id as string;
    expect((await request(a.app).post(`/sessions/${id}/messages`).send({ content: 'q' })).status).toBe(202);
    // The harness runs without auth (org null): a noted turn under another org is not this caller's.
    a.hub.noteStarted(id, 'not-this-one', 'org-x');
    const res = await request(server.url).get(`/sessions/${id}?wait=true&timeout=1`);
    expect(res.status).toBe(200);
    expect(res.body.status).toBe('running');
  });
});
