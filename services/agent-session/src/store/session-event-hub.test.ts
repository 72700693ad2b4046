import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { SessionEventHub } from './session-event-hub';
import { sessionEventsChannel } from './session-keys';

const prefix = `test-${randomUUID()}:`;
let subscriber: Redis;
let publisher: Redis;
let hub: SessionEventHub;

beforeAll(async () => {
  subscriber = new Redis('redis://127.0.0.1:6379', { maxRetriesPerRequest: null });
  publisher = new Redis('redis://127.0.0.1:6379');
  hub = new SessionEventHub(subscriber, prefix);
  await hub.start();
});

afterAll(async () => {
  hub.close();
  await Promise.all([subscriber.quit(), publisher.quit()]);
});

const publish = (sessionId: string) =>
  publisher.publish(sessionEventsChannel(prefix), JSON.stringify({ session_id: sessionId, status: 'idle' }));

describe('SessionEventHub', () => {
  it('remembers an event that arrives before next() (no lost wake-up)', async () => {
    const waiter = hub.register('s1');
    await publish('s1');
    await new Promise((r) => setTimeout(r, 30));
    await expect(waiter.next(Date.now() + 5000)).resolves.toBe('event');
    waiter.dispose();
  });

  it('wakes every waiter of the session and none of another', async () => {
    const a = hub.register('s2');
    const b = hub.register('s2');
    const other = hub.register('s3');
    const results = Promise.all([a.next(null), b.next(null)]);
    const otherResult = other.next(Date.now() + 100);
    await publish('s2');
    await expect(results).resolves.toEqual(['event', 'event']);
    await expect(otherResult).resolves.toBe('timeout');
    for (const w of [a, b, other]) w.dispose();
    expect(hub.size).toBe(0);
  });

  it('resolves disposed when freed mid-wait and ignores junk messages', async () => {
    const waiter = hub.register('s4');
    const pending = waiter.next(null);
    await publisher.publish(sessionEventsChannel(prefix), 'not json');
    waiter.dispose();
    await expect(pending).resolves.toBe('disposed');
  });

  it('wakes every waiter to re-read after the subscriber reconnects, and still receives events', async () => {
    const waiter = hub.register('s5');
    const woken = waiter.next(Date.now() + 5000);
    subscriber.disconnect(true);
    await expect(woken).resolves.toBe('event');
    expect(waiter.lastEvent()).toBeNull();
    const next = waiter.next(Date.now() + 5000);
    await publish('s5');
    await expect(next).resolves.toBe('event');
    expect(waiter.lastEvent()).toMatchObject({ session_id: 's5', status: 'idle' });
    waiter.dispose();
  });
});
