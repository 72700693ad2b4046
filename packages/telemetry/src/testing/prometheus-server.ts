import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { freePort } from '@tollway/service-kit/testing';

/** A scrape job: its name and `host:port` targets (each serving `/metrics`). */
export interface ScrapeJob {
  job: string;
  targets: string[];
}

/** A real Prometheus server started for a test. */
export interface PrometheusServer {
  /** `http://127.0.0.1:PORT` */
  url: string;
  /** Runs an instant query; resolves with the result vector. */
  query(promql: string): Promise<Array<{ metric: Record<string, string>; value: [number, string] }>>;
  stop(): Promise<void>;
}

/** The Prometheus binary (Debian's `prometheus` package). */
export const PROMETHEUS_BIN = '/usr/bin/prometheus';

export { freePort };

/**
 * Starts `prometheus` on a free port with a generated config scraping `jobs` every
 * `intervalSeconds`, its data in a temporary folder removed by `stop`. Resolves once it is ready.
 */
export async function startPrometheus(jobs: ScrapeJob[], intervalSeconds = 1): Promise<PrometheusServer> {
  const dir = mkdtempSync(path.join(tmpdir(), 'tollway-prometheus-'));
  const config = [
    'global:',
    `  scrape_interval: ${intervalSeconds}s`,
    `  scrape_timeout: ${intervalSeconds}s`,
    'scrape_configs:',
    ...jobs.flatMap((job) => [
      `  - job_name: ${JSON.stringify(job.job)}`,
      '    static_configs:',
      `      - targets: ${JSON.stringify(job.targets)}`,
    ]),
  ].join('\n');
  writeFileSync(path.join(dir, 'prometheus.yml'), `${config}\n`);
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const child: ChildProcess = spawn(
    PROMETHEUS_BIN,
    [
      `--config.file=${path.join(dir, 'prometheus.yml')}`,
      `--storage.tsdb.path=${path.join(dir, 'data')}`,
      `--web.listen-address=127.0.0.1:${port}`,
      '--log.level=warn',
    ],
    { stdio: ['ignore', 'ignore', 'pipe'] },
  );
  let stderr = '';
  child.stderr?.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGTERM');
      const force = setTimeout(() => child.kill('SIGKILL'), 5000);
      await exited;
      clearTimeout(force);
    }
    rmSync(dir, { recursive: true, force: true });
  };
  const deadline = Date.now() + 30_000;
  for (;;) {
    const ready = await fetch(`${url}/-/ready`).then(
      (res) => res.status === 200,
      () => false,
    );
    if (ready) break;
    if (child.exitCode !== null || Date.now() > deadline) {
      await stop();
      throw new Error(`prometheus did not become ready: ${stderr}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  return {
    url,
    async query(promql) {
      const res = await fetch(`${url}/api/v1/query?query=${encodeURIComponent(promql)}`);
      const body = (await res.json()) as {
        status: string;
        error?: string;
        data?: { resultType: string; result: Array<{ metric: Record<string, string>; value: [number, string] }> };
      };
      if (body.status !== 'success') throw new Error(`query ${promql} failed: ${body.error}`);
      return body.data?.result ?? [];
    },
    stop,
  };
}
