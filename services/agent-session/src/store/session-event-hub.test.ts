import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { END_ANSWER_MS, SessionEventHub } from './session-event-hub';
import { endAnswersChannel, replicaEventsChannel, sessionEventsChannel } from './session-keys';

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

  describe('turns started on this replica', () => {
    const ended = (sessionId: string, turnId: string) =>
      publisher.publish(
        replicaEventsChannel(prefix, hub.replicaId),
        JSON.stringify({ session_id: sessionId, turn_id: turnId, status: 'idle' }),
      );
    const settle = () => new Promise((r) => setTimeout(r, 30));

    it('knows the running turn until its end arrives on its own channel, and only for the same org', async () => {
      hub.noteStarted('k1', 't1', 'org-a');
      expect(hub.runningTurn('k1', 'org-a')).toBe('t1');
      expect(hub.runningTurn('k1', 'org-b')).toBeNull();
      expect(hub.runningTurn('k1', null)).toBeNull();
      await ended('k1', 't0'); // a late end of an earlier turn changes nothing
      await settle();
      expect(hub.runningTurn('k1', 'org-a')).toBe('t1');
      await ended('k1', 't1');
      await settle();
      expect(hub.runningTurn('k1', 'org-a')).toBeNull();
    });

    it('does not note a turn whose end overtook the reply to its send', async () => {
      await ended('k2', 't2');
      await settle();
      hub.noteStarted('k2', 't2', null);
      expect(hub.runningTurn('k2', null)).toBeNull();
    });

    it('knows a turn it started has ended, until its next send here, a deletion or a reconnection', async () => {
      hub.noteStarted('e1', 'et1', 'org-a');
      expect(hub.endedHere('e1', 'org-a')).toBe(false);
      await ended('e1', 'et0'); // an earlier turn's late end is not this turn's
      await settle();
      expect(hub.endedHere('e1', 'org-a')).toBe(false);
      await ended('e1', 'et1');
      await settle();
      expect(hub.endedHere('e1', 'org-a')).toBe(true);
      expect(hub.endedHere('e1', 'org-b')).toBe(false);
      expect(hub.endedHere('e1', null)).toBe(false);
      hub.noteStarted('e1', 'et2', 'org-a');
      expect(hub.endedHere('e1', 'org-a')).toBe(false);
      await ended('e1', 'et2');
      await settle();
      expect(hub.endedHere('e1', 'org-a')).toBe(true);
      await publisher.publish(sessionEventsChannel(prefix), JSON.stringify({ session_id: 'e1', status: 'deleted' }));
      await settle();
      expect(hub.endedHere('e1', 'org-a')).toBe(false);
      // an end of a turn it did not start here says nothing
      await ended('e2', 'et9');
      await settle();
      expect(hub.endedHere('e2', null)).toBe(false);
    });

    it('forgets a deleted session, and everything after the subscriber reconnects', async () => {
      hub.noteStarted('k3', 't3', null);
      hub.noteStarted('k4', 't4', null);
      hub.noteStarted('k6', 't6', null);
      await ended('k6', 't6');
      await publisher.publish(sessionEventsChannel(prefix), JSON.stringify({ session_id: 'k3', status: 'deleted' }));
      await settle();
      expect(hub.runningTurn('k3', null)).toBeNull();
      expect(hub.runningTurn('k4', null)).toBe('t4');
      expect(hub.endedHere('k6', null)).toBe(true);
      const waiter = hub.register('k4');
      const woken = waiter.next(Date.now() + 5000);
      subscriber.disconnect(true);
      hub.noteStarted('k5', 't5', null); // while the subscriber is away: not noted
      await expect(woken).resolves.toBe('event');
      waiter.dispose();
      expect(hub.runningTurn('k4', null)).toBeNull();
      expect(hub.runningTurn('k5', null)).toBeNull();
      expect(hub.endedHere('k6', null)).toBe(false);
    });
  });

  describe('answers from the end of a turn it started (recentEnd)', () => {
    let now = 0;
    let answering: SessionEventHub;
    let sub: Redis;
    const end = (sessionId: string, turnId: string, extra: Record<string, unknown> = {}) =>
      publisher.publish(
        replicaEventsChannel(`${prefix}answers:`, answering.replicaId),
        JSON.stringify({
          session_id: sessionId,
          turn_id: turnId,
          status: 'idle',
          response: '{"role":"assistant"}',
          ...extra,
        }),
      );
    const settle = () => new Promise((r) => setTimeout(r, 30));
    /** Waits until the end of `sessionId`'s noted turn has reached the hub (large ones take a while). */
    const arrived = async (sessionId: string) => {
      for (let i = 0; i < 400 && !answering.endedHere(sessionId, null); i++) await settle();
    };

    beforeAll(async () => {
      sub = new Redis('redis://127.0.0.1:6379', { maxRetriesPerRequest: null });
      answering = new SessionEventHub(sub, `${prefix}answers:`, {
        redis: publisher,
        clock: () => now,
        peerCheckMs: 50,
        endAnswerBytes: 100_000,
      });
      await answering.start();
    });
    afterAll(async () => {
      answering.close();
      await sub.quit();
    });
    beforeEach(() => {
      now = Date.now();
    });

    it('holds the end for END_ANSWER_MS, for the same org, until the next send here or a deletion', async () => {
      answering.noteStarted('r1', 'rt1', 'org-a');
      expect(answering.recentEnd('r1', 'org-a')).toBeNull(); // running: not ended
      await end('r1', 'rt0'); // an earlier turn's end is not held
      await settle();
      expect(answering.recentEnd('r1', 'org-a')).toBeNull();
      await end('r1', 'rt1');
      await settle();
      expect(answering.recentEnd('r1', 'org-a')).toMatchObject({ session_id: 'r1', turn_id: 'rt1', status: 'idle' });
      expect(answering.recentEnd('r1', 'org-b')).toBeNull();
      now += END_ANSWER_MS + 1;
      expect(answering.recentEnd('r1', 'org-a')).toBeNull();
      expect(answering.endedHere('r1', 'org-a')).toBe(true); // still a hint for a plain read
      now -= END_ANSWER_MS + 1;
      answering.forgetSession('r1'); // a send here, before its script runs
      expect(answering.recentEnd('r1', 'org-a')).toBeNull();
      expect(answering.endedHere('r1', 'org-a')).toBe(false);
      answering.noteStarted('r2', 'rt2', null);
      await end('r2', 'rt2');
      await settle();
      expect(answering.recentEnd('r2', null)).not.toBeNull();
      await publisher.publish(
        sessionEventsChannel(`${prefix}answers:`),
        JSON.stringify({ session_id: 'r2', status: 'deleted' }),
      );
      await settle();
      expect(answering.recentEnd('r2', null)).toBeNull();
    });

    it('drops it when another replica starts a turn on the session, and not for that very turn', async () => {
      answering.noteStarted('r3', 'rt3', null);
      await end('r3', 'rt3');
      await settle();
      expect(answering.recentEnd('r3', null)).not.toBeNull();
      const started = (turnId: string) =>
        publisher.publish(
          replicaEventsChannel(`${prefix}answers:`, answering.replicaId),
          JSON.stringify({ session_id: 'r3', turn_id: turnId, status: 'running' }),
        );
      await started('rt3'); // a late notice of the turn it holds the end of changes nothing
      await settle();
      expect(answering.recentEnd('r3', null)).not.toBeNull();
      const waiter = answering.register('r3');
      const woken = waiter.next(Date.now() + 100);
      await started('rt4');
      await settle();
      expect(answering.recentEnd('r3', null)).toBeNull();
      expect(answering.endedHere('r3', null)).toBe(false);
      await expect(woken).resolves.toBe('timeout'); // a start wakes no long-poll
      waiter.dispose();
    });

    it('holds no end over a tenth of its budget, and none while a replica of an earlier build is up', async () => {
      answering.noteStarted('r4', 'rt4', null);
      await end('r4', 'rt4', { response: JSON.stringify({ role: 'assistant', content: 'x'.repeat(11_000) }) });
      await arrived('r4');
      expect(answering.recentEnd('r4', null)).toBeNull();
      expect(answering.endedHere('r4', null)).toBe(true);
      // An earlier build's replica listens on the shared channel but not on the answers channel.
      const earlier = new Redis('redis://127.0.0.1:6379', { maxRetriesPerRequest: null });
      try {
        await earlier.subscribe(sessionEventsChannel(`${prefix}answers:`));
        answering.noteStarted('r5', 'rt5', null);
        await end('r5', 'rt5');
        await new Promise((r) => setTimeout(r, 150));
        expect(answering.endedHere('r5', null)).toBe(true);
        expect(answering.recentEnd('r5', null)).toBeNull();
        await earlier.subscribe(endAnswersChannel(`${prefix}answers:`)); // now it is of this build
        await new Promise((r) => setTimeout(r, 150));
        expect(answering.recentEnd('r5', null)).not.toBeNull();
      } finally {
        earlier.disconnect();
      }
    });

    it('keeps the ends it holds within its byte budget, dropping the oldest', async () => {
      const big = JSON.stringify({ role: 'assistant', content: 'y'.repeat(9_800) });
      for (let i = 0; i < 11; i++) {
        answering.noteStarted(`b${i}`, `bt${i}`, null);
        await end(`b${i}`, `bt${i}`, { response: big });
      }
      await arrived('b10');
      expect(answering.recentEnd('b0', null)).toBeNull();
      expect(answering.endedHere('b0', null)).toBe(true);
      expect(answering.recentEnd('b10', null)).not.toBeNull();
    });

    it('answers nothing without a connection for commands (a hub that cannot check its peers)', async () => {
      hub.noteStarted('r6', 'rt6', null);
      await publisher.publish(
        replicaEventsChannel(prefix, hub.replicaId),
        JSON.stringify({ session_id: 'r6', turn_id: 'rt6', status: 'idle' }),
      );
      await settle();
      expect(hub.endedHere('r6', null)).toBe(true);
      expect(hub.recentEnd('r6', null)).toBeNull();
    });
  });
});
