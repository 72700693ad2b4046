import request from 'supertest';
import { createLogger } from '@tollway/service-kit';
import { endTurnsLostInUpgrade, TURN_LOST_IN_UPGRADE_ERROR } from '../../src/store/legacy-upgrade';
import { sessionKeyBase, sessionKeys } from '../../src/store/session-keys';
import { deleteKeys, startReplica, testPrefix, type ApiReplica } from './api-harness';

/**
 * A session an earlier build (turns in BullMQ, running sessions in a `running` set) left running
 * is ended in error at start, moved into the activity index, and sends again; sessions this build
 * runs are left alone.
 */
const prefix = testPrefix();
const logger = createLogger({ service: 'legacy-upgrade-test', silent: true });
let api: ApiReplica;

beforeAll(async () => {
  api = await startReplica(prefix);
});

afterAll(async () => {
  await api.close();
  await deleteKeys(prefix);
});

it('ends in error a session an earlier build left running, and only those', async () => {
  const keys = sessionKeys(prefix);
  const legacy = `${sessionKeyBase(prefix)}running`;
  const old = (await request(api.app).post('/sessions').send({})).body.session_id as string;
  // As the earlier build's start-turn script left it: running, turn_id set, no job, in `running`.
  await api.redis.hset(keys.session(old), 'status', 'running', 'turn_id', 'old-turn', 'started_at', '1');
  await api.redis.zrem(keys.activity, old);
  await api.redis.zadd(legacy, 1, old);
  const current = (await request(api.app).post('/sessions').send({})).body.session_id as string;
  expect((await request(api.app).post(`/sessions/${current}/messages`).send({ content: 'new' })).status).toBe(202);

  expect(await endTurnsLostInUpgrade(api.redis, api.store, prefix, logger)).toBe(1);
  expect((await request(api.app).get(`/sessions/${old}`)).body).toMatchObject({
    status: 'error',
    error: TURN_LOST_IN_UPGRADE_ERROR,
  });
  expect((await request(api.app).get(`/sessions/${current}`)).body.status).toBe('running');
  expect(await api.redis.exists(legacy)).toBe(0);
  expect(await api.store.count()).toBe(2);
  expect((await request(api.app).post(`/sessions/${old}/messages`).send({ content: 'again' })).status).toBe(202);
  expect(await endTurnsLostInUpgrade(api.redis, api.store, prefix, logger)).toBe(0);
});
