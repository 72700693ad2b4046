// Preloaded into the gateway (`node --import bench/lib/gc-probe.mjs dist/main.js`) by
// bench/node-flags.mjs: records every GC pause (PerformanceObserver 'gc': duration and kind) and,
// on SIGUSR2, writes those recorded since the last dump to GC_PROBE_OUT (JSON) and starts over.
// Costs nothing per request (a GC pause is an entry), so the flag sets are compared as they run;
// diagnostic only, never loaded by the service itself.
import { renameSync, writeFileSync } from 'node:fs';
import { PerformanceObserver } from 'node:perf_hooks';

const out = process.env.GC_PROBE_OUT;
let pauses = [];

new PerformanceObserver((list) => {
  for (const entry of list.getEntries()) {
    // kind: perf_hooks.constants.NODE_PERFORMANCE_GC_* (1 minor, 4 major, 8 incremental marking, 16 weak callbacks)
    pauses.push({ ms: entry.duration, kind: entry.detail?.kind ?? entry.kind });
  }
}).observe({ entryTypes: ['gc'] });

process.on('SIGUSR2', () => {
  if (out) {
    // Whole or not at all: the reader waits for the file to appear.
    writeFileSync(`${out}.part`, JSON.stringify(pauses));
    renameSync(`${out}.part`, out);
  }
  pauses = [];
});
