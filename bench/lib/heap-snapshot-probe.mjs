// Preloaded into the gateway (`node --expose-gc --import bench/lib/heap-snapshot-probe.mjs
// dist/main.js`) by bench/stream-live-set.mjs: on SIGUSR2 it runs a full GC, so the snapshot holds
// only what is alive, and writes a heap snapshot to `${HEAP_SNAPSHOT_OUT}-<n>.heapsnapshot`, n
// counting from 0. Diagnostic only, never loaded by the service itself.
import { renameSync } from 'node:fs';
import { writeHeapSnapshot } from 'node:v8';

const out = process.env.HEAP_SNAPSHOT_OUT;
let taken = 0;

process.on('SIGUSR2', () => {
  if (!out) return;
  globalThis.gc?.();
  const file = `${out}-${taken++}.heapsnapshot`;
  // Whole or not at all: the reader waits for the file to appear.
  writeHeapSnapshot(`${file}.part`);
  renameSync(`${file}.part`, file);
});
