#!/usr/bin/env node
// What a relayed stream keeps alive while it lasts (issue 13): under streaming load every minor GC
// copies the state of each stream in flight, and promotes what survives two of them, so this live
// set, not the garbage, is what a scavenge costs. Starts an engine that writes every event on its
// own, slowly (`--tpot-ms`, so that the streams stay open), and a governed gateway with
// lib/heap-snapshot-probe.mjs preloaded; takes a heap snapshot of the idle gateway after warm-up,
// then one with `--streams` streams in flight, mid-stream; prints the difference per stream: bytes
// and objects, by kind of object, and what holds the objects of the largest kinds.
// Usage: pnpm build && node bench/stream-live-set.mjs [--streams 32] [--tpot-ms 40] [--top 20]
import { randomUUID } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import http from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { benchArgs } from './lib/args.mjs';
import {
  createBenchOrgKey,
  deleteByPrefix,
  gatewayStartFlags,
  httpModelCatalogLines,
  startChatRig,
} from './lib/chat-rig.mjs';
import { startService } from './lib/processes.mjs';

const {
  streams,
  'tpot-ms': tpotMs,
  top,
} = benchArgs('node bench/stream-live-set.mjs [--streams 32] [--tpot-ms 40] [--top 20]', {
  numbers: { streams: 32, 'tpot-ms': 40, top: 20 },
});
const TOKENS = 64;
const SLOW_MODEL = 'bench/slow-per-event';
const gatewayDir = new URL('../services/inference-gateway/', import.meta.url).pathname;
const PROBE = new URL('./lib/heap-snapshot-probe.mjs', import.meta.url).pathname;
const redisUrl = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';

const work = mkdtempSync(join(tmpdir(), 'tollway-live-set-'));
const snapshot = (n) => join(work, `gateway-${n}.heapsnapshot`);
const redis = new Redis(redisUrl);
const prefix = `bench-live-set-${randomUUID()}:`;
const adminToken = `bench-admin-${randomUUID()}`;
const modelLines = ['capacity: 100000', 'price_per_million: { input: 1, output: 2 }'];
const engine = await startService(join(gatewayDir, 'dist/engines/simulated/main-sim.js'), {
  args: ['--port', '0', '--ttft-ms', '0', '--tpot-ms', String(tpotMs), '--max-concurrency', '100000'],
  env: { SIM_IGNORE_EOS: 'true', SIM_FLUSH_EACH_EVENT: 'true' },
  cwd: gatewayDir,
});
let rig;
const agent = new http.Agent({ keepAlive: true, maxSockets: streams });
try {
  rig = await startChatRig({
    useDist: true,
    modelLines,
    extraCatalogLines: httpModelCatalogLines(SLOW_MODEL, engine.port, modelLines),
    gatewayEnv: {
      REDIS_URL: redisUrl,
      REDIS_PREFIX: prefix,
      ADMIN_TOKEN: adminToken,
      HEAP_SNAPSHOT_OUT: join(work, 'gateway'),
    },
    gatewayNodeFlags: [...gatewayStartFlags().flags, '--expose-gc', '--import', PROBE],
  });
  const key = await createBenchOrgKey(rig.gateway.port, adminToken);
  const body = JSON.stringify({
    model: SLOW_MODEL,
    messages: [{ role: 'user', content: 'Say hello to the benchmark.' }],
    max_tokens: TOKENS,
    stream: true,
  });
  const stream = () =>
    new Promise((resolve, reject) => {
      const req = http.request(
        rig.gatewayUrl,
        { method: 'POST', agent, headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' } },
        (res) => {
          if (res.statusCode !== 200) reject(new Error(`status ${res.statusCode}`));
          res.resume();
          res.on('end', resolve);
        },
      );
      req.on('error', reject);
      req.end(body);
    });
  const all = () => Promise.all(Array.from({ length: streams }, stream));
  // Warm-up: the code is compiled and every keep-alive connection open before the idle snapshot.
  for (let i = 0; i < 3; i++) await all();
  await takeSnapshot(0);
  const inFlight = all();
  await sleep((TOKENS * tpotMs) / 2); // every stream half-way through
  await takeSnapshot(1);
  await inFlight;

  const idle = summarize(snapshot(0));
  const busy = summarize(snapshot(1));
  const per = (a, b) => (b - a) / streams;
  console.log(
    `gateway heap: idle ${(idle.bytes / 1024).toFixed(0)} KiB in ${idle.objects} objects; with ${streams} ` +
      `streams in flight ${(busy.bytes / 1024).toFixed(0)} KiB in ${busy.objects}`,
  );
  console.log(
    `alive per stream in flight: ${per(idle.bytes, busy.bytes).toFixed(0)} bytes, ` +
      `${per(idle.objects, busy.objects).toFixed(1)} objects`,
  );
  console.log('\n  bytes  objects  kind (per stream in flight)');
  const rows = [...busy.byKind]
    .map(([kind, [bytes, count]]) => {
      const [idleBytes, idleCount] = idle.byKind.get(kind) ?? [0, 0];
      return { kind, bytes: per(idleBytes, bytes), count: per(idleCount, count) };
    })
    .sort((a, b) => b.bytes - a.bytes)
    .slice(0, top);
  for (const row of rows) {
    console.log(`${row.bytes.toFixed(0).padStart(7)}  ${row.count.toFixed(1).padStart(7)}  ${row.kind}`);
  }
  console.log('\nWhat holds the new objects of the three largest kinds (count per stream, first retainers):');
  for (const row of rows.slice(0, 3)) {
    console.log(`  ${row.kind}`);
    for (const [path, count] of retainers(snapshot(0), snapshot(1), row.kind, 4)) {
      console.log(`    ${(count / streams).toFixed(1).padStart(5)}  ${path}`);
    }
  }
} finally {
  agent.destroy();
  await Promise.all([rig?.stop(), engine.stop()]);
  await deleteByPrefix(redis, prefix);
  redis.disconnect();
  rmSync(work, { recursive: true, force: true });
}

async function takeSnapshot(n) {
  rig.gateway.child.kill('SIGUSR2');
  for (let waited = 0; !existsSync(snapshot(n)); waited += 50) {
    if (waited > 60_000) throw new Error('the heap snapshot probe wrote nothing within 60 s');
    await sleep(50);
  }
}

/** A node's kind: its type, with the name for objects and closures (strings are one kind). */
function kindOf(type, name) {
  if (type.endsWith('string')) return type;
  if (type === 'object' || type === 'closure' || type === 'native') return `${type} ${name.slice(0, 50)}`;
  return type;
}

function readSnapshot(file) {
  const data = JSON.parse(readFileSync(file, 'utf8'));
  const meta = data.snapshot.meta;
  return {
    data,
    nodeFields: meta.node_fields.length,
    edgeFields: meta.edge_fields.length,
    field: (name) => meta.node_fields.indexOf(name),
    nodeTypes: meta.node_types[0],
    edgeTypes: meta.edge_types[0],
  };
}

/** Bytes and objects of a snapshot, in all and by kind. */
function summarize(file) {
  const { data, nodeFields, field, nodeTypes } = readSnapshot(file);
  const [type, name, size] = [field('type'), field('name'), field('self_size')];
  const byKind = new Map();
  let bytes = 0;
  let objects = 0;
  for (let i = 0; i < data.nodes.length; i += nodeFields) {
    const kind = kindOf(nodeTypes[data.nodes[i + type]], data.strings[data.nodes[i + name]]);
    const entry = byKind.get(kind) ?? [0, 0];
    entry[0] += data.nodes[i + size];
    entry[1]++;
    byKind.set(kind, entry);
    bytes += data.nodes[i + size];
    objects++;
  }
  return { bytes, objects, byKind };
}

/**
 * For the objects of `kind` in the second snapshot that the first did not have (node ids are
 * stable within a process), the chain of first strong retainers `depth` deep, counted; top 6.
 */
function retainers(firstFile, secondFile, kind, depth) {
  const first = readSnapshot(firstFile);
  const old = new Set();
  const idAt = first.field('id');
  for (let i = 0; i < first.data.nodes.length; i += first.nodeFields) old.add(first.data.nodes[i + idAt]);
  const { data, nodeFields, edgeFields, field, nodeTypes, edgeTypes } = readSnapshot(secondFile);
  const [type, name, id, edgeCount] = [field('type'), field('name'), field('id'), field('edge_count')];
  const count = data.nodes.length / nodeFields;
  const retainer = new Int32Array(count).fill(-1);
  const via = new Array(count);
  for (let node = 0, edge = 0; node < count; node++) {
    for (let k = 0; k < data.nodes[node * nodeFields + edgeCount]; k++, edge += edgeFields) {
      const edgeType = edgeTypes[data.edges[edge]];
      const to = data.edges[edge + 2] / nodeFields;
      if (edgeType === 'weak' || retainer[to] !== -1) continue;
      retainer[to] = node;
      const label = data.edges[edge + 1];
      via[to] = edgeType === 'element' || edgeType === 'hidden' ? `[${label}]` : String(data.strings[label]);
    }
  }
  const describe = (node) =>
    kindOf(nodeTypes[data.nodes[node * nodeFields + type]], String(data.strings[data.nodes[node * nodeFields + name]]));
  const paths = new Map();
  for (let node = 0; node < count; node++) {
    if (old.has(data.nodes[node * nodeFields + id]) || describe(node) !== kind) continue;
    const path = [];
    for (let at = node, d = 0; d < depth && retainer[at] !== -1; d++, at = retainer[at]) {
      path.push(`${via[at]} of ${describe(retainer[at])}`);
    }
    const key = path.join(' ← ');
    paths.set(key, (paths.get(key) ?? 0) + 1);
  }
  return [...paths].sort((a, b) => b[1] - a[1]).slice(0, 6);
}
