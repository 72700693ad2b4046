import type { Redis } from 'ioredis';
import { createAccountStore, type AccountStore } from '@tollway/accounts';
import { createRedis, type ReplicaWait } from '@tollway/service-kit';
import { startRedisSentinelGroup, type RedisSentinelGroup } from '@tollway/service-kit/testing';
import { RedisAdmission } from '../../src/admission/redis-admission';
import type { AdmissionRequest } from '../../src/admission/admission.types';
import { waitFor } from '../helpers/wait-for';

/**
 * A settlement and a failover (REDIS_WAIT_REPLICAS): the primary applies a settlement and dies
 * before its replica has it. Without the wait, the gateway took the primary's answer for done
 * and the charge is gone with it; with the wait, the WAIT that was still pending breaks with the
 * connection, the batch goes again to the promoted replica, and it is charged there once.
 * Through Sentinel, as the gateway reaches Redis.
 */
const prefix = 'settle-failover:';
let group: RedisSentinelGroup;

beforeEach(async () => {
  group = await startRedisSentinelGroup();
}, 30_000);

afterEach(async () => {
  await group.stop();
});

function request(orgId: string): AdmissionRequest {
  return {
    principal: { orgId, keyId: 'key_failover' },
    modelId: 'failover-model',
    inputTokens: 1000,
    reservedOutputTokens: 2000,
    capacity: 64,
    // 1000 input at $1/M and 1000 output at $2/M: $0.003 a request.
    pricePerMillion: { input: 1, output: 2 },
  };
}

/**
 * Admits a request (replicated), then, with the replica stopped, settles it: the primary applies
 * it, and is killed before the replica ever sees it; the replica comes back and is promoted.
 * Returns the credit the new primary holds once the gateway settled down, and the admission.
 */
async function settleAcrossAFailover(replicaWait: ReplicaWait | null) {
  const connections: Redis[] = [];
  const connect = (name: string) => {
    const redis = createRedis(group.connection, { name, failFast: true });
    redis.on('error', () => undefined);
    connections.push(redis);
    return redis;
  };
  const admissionRedis = connect('failover:admission').duplicate({ commandTimeout: 10_000 });
  admissionRedis.on('error', () => undefined);
  connections.push(admissionRedis);
  const store: AccountStore = createAccountStore({ redis: connect('failover:store'), prefix });
  const admission = new RedisAdmission({
    redis: admissionRedis,
    prefix,
    settlementReplicaWait: replicaWait,
    settlementRetryWindowMs: 30_000,
  });
  try {
    const org = await store.createOrganization({
      name: 'failover',
      budgets: { requests: 1000, input_tokens: 1_000_000, output_tokens: 1_000_000 },
      credit: 10,
    });
    const ticket = await admission.admit(request(org.id));
    const primaryPort = await group.primaryPort();
    const primary = group.client(primaryPort);
    const replica = [...group.nodes.values()].find((node) => node.port !== primaryPort)!;
    // The replica has everything so far (the organization, the admission); then it is stopped
    // and its link cut, so what the primary writes next reaches no replica (a stopped one would
    // still find it in its socket when it wakes).
    await primary.wait(1, 5_000);
    replica.pause();
    await primary.client('KILL', 'TYPE', 'replica');
    const settled = ticket.settle({ prompt_tokens: 1000, completion_tokens: 1000 });
    await waitFor(async () => Number(await primary.hget(store.keys.org(org.id), 'credit')) < 10, 5_000);
    primary.disconnect();
    await group.killPrimary();
    replica.resume();
    await settled;
    const promoted = await group.waitForNewPrimary(primaryPort, 20_000);
    const onPromoted = group.client(promoted);
    try {
      // What the gateway sends again lands within its retry back-off (at most 5 s).
      const credit = async () => Number(await onPromoted.hget(store.keys.org(org.id), 'credit'));
      await waitFor(async () => (await credit()) < 10, replicaWait ? 15_000 : 3_000).catch(() => undefined);
      await admission.close();
      return { credit: await credit(), stats: admission.stats() };
    } finally {
      onPromoted.disconnect();
    }
  } finally {
    await admission.close().catch(() => undefined);
    for (const redis of connections) redis.disconnect();
  }
}

test('with a replica wait, a settlement the dead primary took with it is sent again to the new one, and charged once', async () => {
  // A long wait, so it is still pending when the primary dies, however loaded the machine.
  const { credit, stats } = await settleAcrossAFailover({ replicas: 1, timeoutMs: 5_000 });
  expect(credit).toBeCloseTo(10 - 0.003, 9);
  expect(stats.settlementRetries).toBeGreaterThanOrEqual(1);
  expect(stats.settlementsLost).toBe(0);
}, 60_000);

test('without one, the gateway took the dead primary’s answer for done: the charge is lost', async () => {
  // The contrast that shows the failover really loses the write the wait protects.
  const { credit, stats } = await settleAcrossAFailover(null);
  expect(credit).toBe(10);
  expect(stats.settlementRetries).toBe(0);
}, 60_000);
