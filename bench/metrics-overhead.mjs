#!/usr/bin/env node
// The cost of the gateway's metrics (issue 11): the same build run twice side by side, metrics on
// (METRICS_ENABLED=true) and off (false), each in front of its own instant simulated engine, access
// log off in both so only the metrics differ; a third gateway with metrics and the access log on
// (both defaults) shows what the log line adds. Runs alternate between the gateways, round by
// round and in a rotating order, so drift from other load on a shared machine hits them alike, and
// every run starts its own engine and gateway: two processes of the same build can differ by a
// few per cent for as long as they live (heap layout, JIT decisions), which kept in one process
// per variant for the whole bench read as a cost of the metrics (0.91 one session, where fresh
// processes per run measured the same CPU per request with metrics on and off). The gateways run
// with the node flags of the start script.
// Printed per round and as medians: throughput at 32 connections (ratio on/off, goal ≥ 0.95), p50
// at 1 connection (added µs, goal ≤ 20), and the gateway's CPU per request (steadier under load).
// Usage: node bench/metrics-overhead.mjs [--dist] [--seconds 3] [--rounds 3]
import {
  describeLoadGenerator,
  gatewayStartFlags,
  latencyAtOneConnection,
  startChatRig,
  throughput,
} from './lib/chat-rig.mjs';
import { cpuMsOf, median } from './lib/processes.mjs';
import { benchArgs } from './lib/args.mjs';

const {
  dist: useDist,
  seconds,
  rounds,
} = benchArgs('node bench/metrics-overhead.mjs [--dist] [--seconds 3] [--rounds 3]', {
  numbers: { seconds: 3, rounds: 3 },
  flags: ['dist'],
});
const KEY = 'bench-key';
const body = JSON.stringify({
  model: 'bench/instant',
  messages: [{ role: 'user', content: 'Say hello to the benchmark.' }],
  max_tokens: 16,
});

const VARIANTS = [
  { name: 'metrics on', env: { METRICS_ENABLED: 'true', ACCESS_LOG: 'false' } },
  { name: 'metrics off', env: { METRICS_ENABLED: 'false', ACCESS_LOG: 'false' } },
  { name: 'on + access log', env: { METRICS_ENABLED: 'true', ACCESS_LOG: 'true' } },
];

/** A fresh engine and gateway for one run of `variant`; stopped by the caller. */
function startVariant(variant) {
  return startChatRig({
    useDist,
    modelLines: ['price_per_million: { input: 1, output: 1 }'],
    gatewayEnv: { API_KEYS: KEY, ...variant.env },
    gatewayNodeFlags: gatewayStartFlags().flags,
  });
}

console.log(`${useDist ? 'compiled' : 'tsx'}  ${rounds} rounds × ${seconds}s per measure, fresh processes per run`);
console.log(describeLoadGenerator());
const results = VARIANTS.map(() => ({ p50: [], rps: [], cpu: [] }));
for (let round = 0; round < rounds; round++) {
  const order = VARIANTS.map((_, i) => (i + round) % VARIANTS.length);
  for (const i of order) {
    const rig = await startVariant(VARIANTS[i]);
    try {
      // Warm-up (JIT, pools) before anything is measured.
      await throughput(rig.gatewayUrl, body, KEY, 32, 2);
      const latency = await latencyAtOneConnection(rig.gatewayUrl, body, KEY, seconds);
      await throughput(rig.gatewayUrl, body, KEY, 32, 1);
      const cpuBefore = cpuMsOf(rig.gateway.child.pid);
      const load = await throughput(rig.gatewayUrl, body, KEY, 32, seconds);
      const cpuUs = ((cpuMsOf(rig.gateway.child.pid) - cpuBefore) * 1000) / load.total;
      if (load.errors || load.non2xx)
        throw new Error(`${VARIANTS[i].name}: ${load.errors} errors, ${load.non2xx} non-2xx`);
      results[i].p50.push(latency.p50);
      results[i].rps.push(load.rps);
      results[i].cpu.push(cpuUs);
    } finally {
      await rig.stop();
    }
  }
  const [on, off, logged] = results;
  console.log(
    `round ${round + 1}: rps on/off ${(on.rps[round] / off.rps[round]).toFixed(3)}  ` +
      `p50 on−off ${((on.p50[round] - off.p50[round]) * 1000).toFixed(0)} µs  ` +
      `CPU/request on ${on.cpu[round].toFixed(0)} µs, off ${off.cpu[round].toFixed(0)} µs, +log ${logged.cpu[round].toFixed(0)} µs`,
  );
}

console.log('\nmedians');
for (const [i, variant] of VARIANTS.entries()) {
  const r = results[i];
  console.log(
    `  ${variant.name.padEnd(16)} ${Math.round(median(r.rps))} req/s at 32 conns   p50 ${(median(r.p50) * 1000).toFixed(0)} µs at 1 conn   CPU ${median(r.cpu).toFixed(0)} µs/request`,
  );
}
const [on, off, logged] = results;
const rpsRatios = on.rps.map((rps, round) => rps / off.rps[round]);
const p50Added = on.p50.map((p50, round) => (p50 - off.p50[round]) * 1000);
const cpuRatios = on.cpu.map((cpu, round) => cpu / off.cpu[round]);
console.log(`\nmetrics on vs off (median of per-round ratios, same build, alternating runs)`);
console.log(`  throughput at 32 connections  ${median(rpsRatios).toFixed(3)} of off   (goal ≥ 0.95)`);
console.log(
  `  p50 at 1 connection           ${median(p50Added) >= 0 ? '+' : ''}${median(p50Added).toFixed(0)} µs   (goal ≤ 20 µs)`,
);
console.log(`  gateway CPU per request       ${median(cpuRatios).toFixed(3)} of off`);
const logRatios = logged.rps.map((rps, round) => rps / on.rps[round]);
console.log(`  access log on top             ${median(logRatios).toFixed(3)} of metrics-on throughput`);
