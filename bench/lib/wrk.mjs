// HTTP load from wrk (Debian package `wrk`), a C load generator: one of its threads costs a few
// µs per request, so on a 2-core machine it leaves the cores to what is being measured. A Node
// load generator (autocannon) spends more CPU per request than the gateway itself and saturates
// first: it caps what it can measure at about 8,000 requests/s here.
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** True when a `wrk` binary is on PATH. */
export function haveWrk() {
  const probe = spawnSync('wrk', ['--version'], { encoding: 'utf8' });
  return probe.error === undefined;
}

/**
 * Runs `wrk` with one thread and `connections` keep-alive connections for `seconds`, POSTing
 * `body` with bearer `key`. Resolves `{ rps, total, non2xx, errors, p50, p75, p90, p99 }`
 * (latencies in ms, from wrk's --latency histogram). With `numbered` set, every occurrence of
 * that text in the body is replaced, request after request, by 1, 2, 3…: every body differs.
 */
export async function wrkPost(url, body, key, { connections, seconds, numbered }) {
  const dir = mkdtempSync(join(tmpdir(), 'tollway-wrk-'));
  try {
    const script = join(dir, 'post.lua');
    writeFileSync(
      script,
      [
        'wrk.method = "POST"',
        'wrk.headers["content-type"] = "application/json"',
        `wrk.headers["authorization"] = ${luaString(`Bearer ${key}`)}`,
        `wrk.body = ${luaString(body)}`,
        ...(numbered === undefined ? [] : numberedRequests(body, numbered)),
        '',
      ].join('\n'),
    );
    const output = await run('wrk', [
      '-t1',
      `-c${connections}`,
      `-d${seconds}s`,
      '--latency',
      '--timeout',
      '10s',
      '-s',
      script,
      url,
    ]);
    return parseWrk(output);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Parses wrk's report (exported for the bench's own check). */
export function parseWrk(output) {
  const number = (re) => {
    const match = re.exec(output);
    return match ? Number(match[1]) : 0;
  };
  const percentile = (p) => {
    const match = new RegExp(`^\\s+${p}%\\s+([\\d.]+)(us|ms|s)\\s*$`, 'm').exec(output);
    if (!match) throw new Error(`wrk printed no ${p}% latency:\n${output}`);
    const scale = { us: 0.001, ms: 1, s: 1000 }[match[2]];
    return Number(match[1]) * scale;
  };
  const socketErrors = /Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)/.exec(output);
  return {
    rps: number(/Requests\/sec:\s+([\d.]+)/),
    total: number(/(\d+) requests in/),
    non2xx: number(/Non-2xx or 3xx responses: (\d+)/),
    errors: socketErrors ? socketErrors.slice(1).reduce((sum, n) => sum + Number(n), 0) : 0,
    p50: percentile(50),
    p75: percentile(75),
    p90: percentile(90),
    p99: percentile(99),
  };
}

/** Lua lines of a `request` function sending `body` with every `marker` replaced by a running number. */
function numberedRequests(body, marker) {
  const parts = body.split(marker);
  if (parts.length === 1) throw new Error(`the body has no ${marker} to number`);
  return [
    `local parts, n = { ${parts.map(luaString).join(', ')} }, 0`,
    'request = function()',
    '  n = n + 1',
    '  return wrk.format(nil, nil, nil, table.concat(parts, tostring(n)))',
    'end',
  ];
}

function luaString(text) {
  return `"${text.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n')}"`;
}

function run(command, args) {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.on('data', (data) => {
      out += data;
    });
    child.stderr.on('data', (data) => {
      err += data;
    });
    child.on('error', reject);
    child.on('exit', (code) => (code === 0 ? resolve(out) : reject(new Error(`${command} exited ${code}: ${err}`))));
  });
}
