// Process helpers shared by bench scripts: start a Node entry point (.ts through tsx with the
// @tollway/source condition, .js as is), wait until it logs the port it listens on, sample its
// RSS, stop it. Generic: any service whose "listening" log line is JSON with a `port` field.
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';

/** Arguments that run `file` with node: TypeScript through tsx, JavaScript directly. */
export function nodeArgs(file) {
  return file.endsWith('.ts') ? ['--conditions=@tollway/source', '--import', 'tsx', file] : [file];
}

/**
 * Starts `file` with `args` and `env` (and node flags `execArgv`, e.g. `--cpu-prof`); resolves once a stdout line parses as JSON with a
 * `message` containing "listening" and a numeric `port`. Rejects if the process exits first or
 * after `timeoutMs`.
 */
export function startService(file, { args = [], env = {}, cwd, timeoutMs = 30_000, execArgv = [] } = {}) {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [...execArgv, ...nodeArgs(file), ...args], {
      cwd,
      env: { ...process.env, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stderr = '';
    let buffered = '';
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`${file} did not start within ${timeoutMs} ms: ${stderr}`));
    }, timeoutMs);
    child.stderr.on('data', (data) => {
      stderr += data;
    });
    const readStartupLines = (data) => {
      buffered += data;
      let nl;
      while ((nl = buffered.indexOf('\n')) !== -1) {
        const line = buffered.slice(0, nl);
        buffered = buffered.slice(nl + 1);
        try {
          const record = JSON.parse(line);
          if (
            typeof record.message === 'string' &&
            record.message.includes('listening') &&
            typeof record.port === 'number'
          ) {
            clearTimeout(timer);
            // From here its output (an access log line a request) is read and dropped: parsing it
            // here would spend this process's CPU, on the cores the measured processes share.
            child.stdout.off('data', readStartupLines);
            child.stdout.resume();
            resolve({ child, port: record.port, stop: () => stopProcess(child) });
            return;
          }
        } catch {
          // not a JSON log line
        }
      }
    };
    child.stdout.on('data', readStartupLines);
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`${file} exited with ${code} before listening: ${stderr}`));
    });
  });
}

/** Resident set size of a process in bytes (Linux /proc), or null when unavailable. */
export function rssOf(pid) {
  try {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    const match = /VmRSS:\s+(\d+) kB/.exec(status);
    return match ? Number(match[1]) * 1024 : null;
  } catch {
    return null;
  }
}

/** CPU time (user + system) a process has used so far, in ms (Linux /proc, 100 ticks a second), or null. */
export function cpuMsOf(pid) {
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
    return (Number(fields[11]) + Number(fields[12])) * 10;
  } catch {
    return null;
  }
}

/**
 * CPU time (user + system) of this process's children that have exited and been waited for, in ms
 * (Linux /proc: cutime + cstime). Around one run of a load generator that is the only child to
 * exit meanwhile, the difference is the load generator's own CPU.
 */
export function exitedChildrenCpuMs() {
  const fields = readFileSync('/proc/self/stat', 'utf8').split(') ')[1].split(' ');
  return (Number(fields[13]) + Number(fields[14])) * 10;
}

/** The whole machine's CPU time so far (Linux /proc/stat, all cores), in ms: `{ busy, total }`. */
export function machineCpuMs() {
  const ticks = readFileSync('/proc/stat', 'utf8').split('\n')[0].trim().split(/\s+/).slice(1).map(Number);
  const total = ticks.slice(0, 8).reduce((sum, n) => sum + n, 0);
  const idle = ticks[3] + ticks[4];
  return { busy: (total - idle) * 10, total: total * 10 };
}

/** Samples `pid`'s RSS every `everyMs` until the returned function is called; it returns the peak. */
export function sampleRss(pid, everyMs = 100) {
  let peak = rssOf(pid) ?? 0;
  const timer = setInterval(() => {
    peak = Math.max(peak, rssOf(pid) ?? 0);
  }, everyMs);
  return () => {
    clearInterval(timer);
    return Math.max(peak, rssOf(pid) ?? 0);
  };
}

/** Sends SIGTERM, then SIGKILL after 3 s; resolves when the process is gone. */
export function stopProcess(child) {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    const kill = setTimeout(() => child.kill('SIGKILL'), 3000);
    child.once('exit', () => {
      clearTimeout(kill);
      resolve();
    });
    child.kill('SIGTERM');
  });
}

/** The median of `values` (any order). */
export function median(values) {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
}

/** The smallest and the largest of `values`, as `min-max` with two decimals. */
export function fmtRange(values) {
  return `${Math.min(...values).toFixed(2)}-${Math.max(...values).toFixed(2)}`;
}

/** Value at quantile q (0–1) of an ascending-sorted array. */
export function quantile(sorted, q) {
  if (sorted.length === 0) return NaN;
  const index = Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1));
  return sorted[index];
}
