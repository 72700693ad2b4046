// Where a platform's Redis commands come from: MONITOR on a private Redis for a while, each line
// put down to a cause by the connection that sent it (CLIENT LIST names), the keys it names and,
// for a command a Lua script ran, the script call before it. MONITOR slows Redis down, so the
// counts come from a pass of their own, never from the pass whose CPU and rate are reported.
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';

/** The causes, in the order a report lists them. */
export const CAUSES = [
  'BullMQ',
  'session scripts (API: create, send, delete)',
  'session scripts (worker: claim, end, reap)',
  'long-poll and session reads',
  'worker registry',
  'pub/sub',
  'gateway call',
  'other',
];

/**
 * Records the commands Redis at `port` runs for `seconds`; resolves `{ byCause: Map, total }` with
 * commands per cause (a script's own commands counted with it).
 */
export async function monitorCauses(port, seconds, clientNames) {
  const monitor = spawn('redis-cli', ['-p', String(port), 'monitor'], { stdio: ['ignore', 'pipe', 'ignore'] });
  const byCause = new Map(CAUSES.map((cause) => [cause, 0]));
  let total = 0;
  let scriptCause = 'other';
  const lines = createInterface({ input: monitor.stdout });
  lines.on('line', (line) => {
    const match = /^[\d.]+ \[\d+ ([^\]]+)\] "([^"]+)"(.*)$/.exec(line);
    if (!match) return;
    const [, source, rawCommand, rest] = match;
    const command = rawCommand.toLowerCase();
    if (command === 'monitor' || command === 'client' || command === 'info') return;
    let cause;
    if (source === 'lua') cause = scriptCause;
    else {
      cause = causeOf(clientNames().get(source) ?? '', command, rest);
      if (command === 'evalsha' || command === 'eval') scriptCause = cause;
    }
    byCause.set(cause, byCause.get(cause) + 1);
    total++;
  });
  await new Promise((resolve) => setTimeout(resolve, seconds * 1000));
  monitor.kill('SIGTERM');
  await new Promise((resolve) => monitor.once('exit', resolve));
  return { byCause, total };
}

function causeOf(name, command, rest) {
  const firstKey = /^ "(?:[0-9a-f]{40}|[^"]*)" "\d+" "([^"]*)"/.exec(rest)?.[1] ?? /^ "([^"]*)"/.exec(rest)?.[1] ?? '';
  const isScript = command === 'evalsha' || command === 'eval';
  const key = isScript ? firstKey : (/^ "([^"]*)"/.exec(rest)?.[1] ?? '');
  if (name.startsWith('gateway')) return 'gateway call';
  if (/bull/.test(key) || name.includes('queue') || name.startsWith('bull')) return 'BullMQ';
  if (['publish', 'subscribe', 'psubscribe', 'unsubscribe'].includes(command)) return 'pub/sub';
  if (/\{workers\}|\{sessions\}:workers|worker-slots/.test(key)) return 'worker registry';
  if (name.includes('worker') || name.includes('turn-cancel')) {
    return isScript
      ? 'session scripts (worker: claim, end, reap)'
      : key
        ? 'session scripts (worker: claim, end, reap)'
        : 'other';
  }
  if (name.includes('api') || name.includes('events')) {
    if (isScript) return /apikey|\{org:/.test(key) ? 'gateway call' : 'session scripts (API: create, send, delete)';
    return 'long-poll and session reads';
  }
  return 'other';
}

/** Maps `host:port` of each client of Redis to its connection name, read now (CLIENT LIST). */
export async function clientNames(redis) {
  const names = new Map();
  for (const line of (await redis.client('LIST')).split('\n')) {
    const addr = /addr=(\S+)/.exec(line)?.[1];
    const name = /name=(\S*)/.exec(line)?.[1];
    if (addr) names.set(addr, name ?? '');
  }
  return names;
}
