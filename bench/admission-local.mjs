#!/usr/bin/env node
// In-process cost of admission, without HTTP: one request admitted and settled, for
//  (a) the unmetered admission (static API_KEYS keys), the baseline;
//  (b) RedisAdmission with local admission (quota slices and capacity blocks, as deployed);
//  (c) RedisAdmission admitting every request in Redis (ADMISSION_SLICES=false), awaited one at
//      a time, so its figure is mostly the round trip;
// all three budgets, credit and a capacity enforced. Prints µs per request and the ratio to (a).
// Usage: node bench/admission-local.mjs [--dist] [--requests 200000]
import { randomUUID } from 'node:crypto';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const argv = process.argv.slice(2);
const useDist = argv.includes('--dist');
const at = argv.indexOf('--requests');
const requests = at === -1 ? 200_000 : Number(argv[at + 1]);

if (process.env.TOLLWAY_ADMISSION_BENCH_CHILD !== '1') {
  // Run the measurement in a child: through tsx on the sources, or on the compiled services.
  const args = useDist ? [] : ['--conditions=@tollway/source', '--import', 'tsx'];
  const child = spawnSync(process.execPath, [...args, fileURLToPath(import.meta.url), ...argv], {
    stdio: 'inherit',
    env: { ...process.env, TOLLWAY_ADMISSION_BENCH_CHILD: '1' },
  });
  process.exit(child.status ?? 1);
}

const root = new URL('..', import.meta.url).pathname;
const from = (src, dist) => `${root}services/inference-gateway/${useDist ? dist : src}`;
const { Redis } = await import('ioredis');
const { createAccountStore, deleteKeysWithPrefix } = await import(
  `${root}packages/accounts/${useDist ? 'dist/index.js' : 'src/index.ts'}`
);
const { RedisAdmission } = await import(from('src/admission/redis-admission.ts', 'dist/admission/redis-admission.js'));
const { UnmeteredAdmission } = await import(
  from('src/admission/unmetered.admission.ts', 'dist/admission/unmetered.admission.js')
);

const redisUrl = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const prefix = `bench-${randomUUID()}:`;
const redis = new Redis(redisUrl);
const subscriber = new Redis(redisUrl);
const store = createAccountStore({ redis, prefix });
try {
  const org = await store.createOrganization({
    name: 'bench',
    budgets: { requests: 100_000_000, input_tokens: 10_000_000_000, output_tokens: 10_000_000_000 },
    credit: 1_000_000,
  });
  const request = {
    principal: { orgId: org.id, keyId: 'key_bench' },
    modelId: 'bench/instant',
    inputTokens: 14,
    reservedOutputTokens: 16,
    reservationIsDefault: false,
    capacity: 100_000,
    pricePerMillion: { input: 1, output: 2 },
  };
  const usage = { prompt_tokens: 14, completion_tokens: 9 };
  // Every 32 requests the loop yields to the event loop, as a server does between requests, so
  // settlement writes (timers, setImmediate) run and are counted.
  const run = async (admission, n) => {
    for (let i = 0; i < n; i++) {
      (await admission.admit(request)).settle(usage);
      if (i % 32 === 31) await new Promise((resolve) => setImmediate(resolve));
    }
  };
  const measure = async (admission, n) => {
    await run(admission, Math.min(n, 20_000));
    const start = process.hrtime.bigint();
    await run(admission, n);
    return Number(process.hrtime.bigint() - start) / n / 1000;
  };

  const local = new RedisAdmission({ redis, prefix, localQuota: {}, subscriber });
  await local.ready();
  const inRedis = new RedisAdmission({ redis, prefix });
  const baseline = await measure(new UnmeteredAdmission(), requests);
  const sliced = await measure(local, requests);
  const perRequest = await measure(inRedis, Math.max(1000, Math.floor(requests / 100)));
  await Promise.all([local.close(), inRedis.close()]);

  console.log(`in-process admission, µs per request admitted and settled (${useDist ? 'compiled' : 'tsx'})`);
  console.log(`  (a) unmetered (baseline)          ${baseline.toFixed(2)}`);
  console.log(`  (b) local admission (slices)      ${sliced.toFixed(2)}   ${(sliced / baseline).toFixed(1)}× (a)`);
  console.log(
    `  (c) every request in Redis        ${perRequest.toFixed(2)}   ${(perRequest / baseline).toFixed(1)}× (a)`,
  );
} finally {
  await deleteKeysWithPrefix(redis, prefix);
  redis.disconnect();
  subscriber.disconnect();
}
