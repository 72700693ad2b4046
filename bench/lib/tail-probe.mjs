// Preloaded into the gateway (`node --import bench/lib/tail-probe.mjs dist/main.js`) by
// bench/tail-causes.mjs: records, inside the process, what happened while each chat request was
// being served, so slow requests can be told apart by cause. It records
//  - every POST /v1/chat/completions: start and finish (performance.now), metered or not;
//  - every GC pause (PerformanceObserver 'gc': start, duration, kind);
//  - every Redis command the gateway sends (ioredis sendCommand): when sent, when answered, which
//    script (admit, settle, return) or command;
//  - every timer and immediate callback that ran (setTimeout, setInterval, setImmediate): when,
//    how long, and where it was created (first frame outside node internals).
// On SIGUSR2 it writes what it recorded since the last dump to TAIL_PROBE_OUT (JSON) and starts
// over. Diagnostic only: it costs a few µs per request and is never loaded by the service itself.
import { writeFileSync } from 'node:fs';
import http from 'node:http';
import { createRequire } from 'node:module';
import { performance, PerformanceObserver } from 'node:perf_hooks';

const out = process.env.TAIL_PROBE_OUT;
let requests = [];
let gcs = [];
let redisCalls = [];
let callbacks = [];

new PerformanceObserver((list) => {
  for (const entry of list.getEntries())
    gcs.push({ start: entry.startTime, duration: entry.duration, kind: entry.detail?.kind ?? entry.kind });
}).observe({ entryTypes: ['gc'] });

const emit = http.Server.prototype.emit;
http.Server.prototype.emit = function (event, req, res) {
  if (event === 'request' && req.method === 'POST' && req.url?.startsWith('/v1/chat/completions')) {
    const record = { start: performance.now(), end: 0, metered: /Bearer tw-/.test(req.headers.authorization ?? '') };
    res.once('finish', () => {
      record.end = performance.now();
      requests.push(record);
    });
  }
  return emit.apply(this, arguments);
};

// ioredis as the gateway resolves it (the probe is loaded from the gateway's directory).
const { Redis } = createRequire(`${process.cwd()}/`)('ioredis');
const sendCommand = Redis.prototype.sendCommand;
Redis.prototype.sendCommand = function (command, ...rest) {
  const record = { sent: performance.now(), answered: 0, name: labelOf(command) };
  redisCalls.push(record);
  command.promise?.then(
    () => (record.answered = performance.now()),
    () => (record.answered = performance.now()),
  );
  return sendCommand.call(this, command, ...rest);
};

function labelOf(command) {
  const name = String(command.name).toLowerCase();
  if (name !== 'eval' && name !== 'evalsha') return name;
  const args = command.args.map(String);
  const keys = args.slice(2, 2 + Number(args[1]));
  if (keys[2]?.endsWith(':leases') && keys[3]?.endsWith(':slices')) return 'admit';
  if (keys.some((key) => key.includes(':usage:'))) return 'settle';
  return 'return or settle';
}

function siteOf() {
  const limit = Error.stackTraceLimit;
  Error.stackTraceLimit = 8;
  const stack = new Error().stack?.split('\n') ?? [];
  Error.stackTraceLimit = limit;
  const frame = stack.slice(3).find((line) => !line.includes('node:') && !line.includes('tail-probe'));
  return (frame ?? '?').trim().replace(/^at /, '').replace(process.cwd(), '.');
}

function wrapTimer(name) {
  const original = globalThis[name];
  globalThis[name] = function (callback, ...rest) {
    if (typeof callback !== 'function') return original.call(this, callback, ...rest);
    const site = siteOf();
    const kind = name;
    return original.call(
      this,
      function (...args) {
        const start = performance.now();
        try {
          return callback.apply(this, args);
        } finally {
          callbacks.push({ kind, site, start, duration: performance.now() - start });
        }
      },
      ...rest,
    );
  };
}
for (const name of ['setTimeout', 'setInterval', 'setImmediate']) wrapTimer(name);

process.on('SIGUSR2', () => {
  if (out) writeFileSync(out, JSON.stringify({ requests, gcs, redisCalls, callbacks }));
  requests = [];
  gcs = [];
  redisCalls = [];
  callbacks = [];
});
