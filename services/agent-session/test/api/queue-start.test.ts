import net from 'node:net';
import type { Redis } from 'ioredis';
import request from 'supertest';
import { createRedis } from '@tollway/service-kit';
import { TurnQueueProducer } from '../../src/store/turn-queue';
import { deleteKeys, startReplica, testPrefix, type ApiReplica } from './api-harness';

/**
 * The turn queue's start meets one slow Redis reply (a Redis busy with a fork, a process starved of
 * CPU as it comes up): the API must still queue turns, not answer every send 503 for its life.
 * A relay in front of the real Redis holds every reply on a connection for 1.5 s (over the 700 ms
 * reply timeout of a fail-fast connection) once it has seen a second INFO on it: ioredis's ready
 * check sends the first, BullMQ's version check used to send the second.
 */
const prefix = testPrefix();
let relay: net.Server;
let connection: Redis;
let queue: TurnQueueProducer;
let api: ApiReplica;

beforeAll(async () => {
  relay = net.createServer((client) => {
    const upstream = net.connect(6379, '127.0.0.1');
    let infos = 0;
    let holdUntil = 0;
    const held: Buffer[] = [];
    client.on('data', (chunk: Buffer) => {
      infos += (chunk.toString('latin1').match(/\$4\r\ninfo\r\n/gi) ?? []).length;
      if (infos >= 2 && holdUntil === 0) {
        holdUntil = Date.now() + 1500;
        setTimeout(() => {
          for (const part of held.splice(0)) client.write(part);
        }, 1500);
      }
      upstream.write(chunk);
    });
    upstream.on('data', (chunk: Buffer) => {
      if (Date.now() < holdUntil || held.length > 0) held.push(chunk);
      else client.write(chunk);
    });
    const end = () => {
      client.destroy();
      upstream.destroy();
    };
    for (const socket of [client, upstream]) socket.on('close', end).on('error', end);
  });
  await new Promise<void>((resolve) => relay.listen(0, '127.0.0.1', resolve));
  const port = (relay.address() as net.AddressInfo).port;
  connection = createRedis(`redis://127.0.0.1:${port}`, { name: 'queue-start-test', failFast: true });
  connection.on('error', () => undefined);
  await new Promise((resolve) => connection.once('ready', resolve));
  queue = new TurnQueueProducer(connection, prefix);
  api = await startReplica(prefix, { turnQueue: queue });
});

afterAll(async () => {
  await api.close();
  await queue.close().catch(() => undefined);
  connection.disconnect();
  await new Promise((resolve) => relay.close(resolve));
  await deleteKeys(prefix);
});

it('queues turns once Redis answers at speed again, and /readyz says so only when it can', async () => {
  await new Promise((resolve) => setTimeout(resolve, 2000)); // the slow reply is long past
  const ready = await request(api.app).get('/readyz');
  expect(ready.status).toBe(200);
  for (let i = 0; i < 3; i++) {
    const id = (await request(api.app).post('/sessions')).body.session_id as string;
    const sent = await request(api.app)
      .post(`/sessions/${id}/messages`)
      .send({ content: `hello ${i}` });
    expect([i, sent.status, sent.body.error?.code]).toEqual([i, 202, undefined]);
  }
  expect((await queue.counts()).waiting).toBe(3);
});

it('/readyz is 503 while the turn queue cannot start', async () => {
  const closed = createRedis('redis://127.0.0.1:6379', { name: 'queue-start-closed', failFast: true });
  await new Promise((resolve) => closed.once('ready', resolve));
  await closed.quit();
  const broken = new TurnQueueProducer(closed, prefix);
  const replica = await startReplica(prefix, { turnQueue: broken });
  try {
    const res = await request(replica.app).get('/readyz');
    expect(res.status).toBe(503);
    expect(res.body.error.code).toBe('service_unavailable');
  } finally {
    await replica.close();
    await broken.close().catch(() => undefined);
  }
});
