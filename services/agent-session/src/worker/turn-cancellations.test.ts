import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { createLogger } from '@tollway/service-kit';
import { turnCancelChannel } from '../store/session-store';
import { TurnCancellations } from './turn-cancellations';

const prefix = `test-${randomUUID()}:`;
const redis = new Redis('redis://127.0.0.1:6379');
const subscriber = new Redis('redis://127.0.0.1:6379');
let cancellations: TurnCancellations;

beforeAll(async () => {
  cancellations = await TurnCancellations.start(subscriber, prefix, createLogger({ service: 't', silent: true }));
});

afterAll(async () => {
  await cancellations.close();
  const keys = await redis.keys(`${prefix}*`);
  if (keys.length > 0) await redis.del(...keys);
  await redis.quit();
});

it('aborts a held turn named on the cancel channel, and only that one', async () => {
  const a = cancellations.track('turn-a', randomUUID());
  const b = cancellations.track('turn-b', randomUUID());
  await redis.publish(turnCancelChannel(prefix), JSON.stringify({ session_id: 'x', turn_id: 'turn-a' }));
  await redis.publish(turnCancelChannel(prefix), 'not json');
  for (let i = 0; i < 200 && !a.aborted; i++) await new Promise((resolve) => setTimeout(resolve, 10));
  expect(a.aborted).toBe(true);
  expect(b.aborted).toBe(false);
  cancellations.untrack('turn-a');
  cancellations.untrack('turn-b');
});

it('cancels the held turns the heartbeat reports lost, and only those', async () => {
  const kept = cancellations.track('turn-live', randomUUID());
  const gone = cancellations.track('turn-gone', randomUUID());
  cancellations.cancelLost([{ turnId: 'turn-gone' }, { turnId: 'turn-not-held' }]);
  expect(gone.aborted).toBe(true);
  expect(kept.aborted).toBe(false);
  cancellations.untrack('turn-live');
  cancellations.untrack('turn-gone');
});
