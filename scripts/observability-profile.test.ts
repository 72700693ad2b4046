/**
 * The `observability` compose profile, checked with what runs here (no Docker engine): its
 * services and mounted files exist, Prometheus's config passes `promtool check config` and scrapes
 * every process at the port compose gives it, the collector takes OTLP over HTTP into a traces
 * pipeline, and every series the Grafana dashboard queries is one the services export.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { parse } from 'yaml';

const ROOT = resolve(__dirname, '..');
const DIR = join(ROOT, 'deploy', 'observability');

interface ComposeService {
  profiles?: string[];
  volumes?: string[];
  environment?: Record<string, string>;
}
const compose = parse(readFileSync(join(ROOT, 'docker-compose.yml'), 'utf8'), { merge: true }) as {
  services: Record<string, ComposeService>;
};

/** Every TypeScript source of the services and packages, concatenated (to find metric names in). */
function sources(dir: string): string {
  return readdirSync(dir, { withFileTypes: true })
    .map((entry) => {
      const path = join(dir, entry.name);
      if (entry.isDirectory()) return entry.name === 'node_modules' || entry.name === 'dist' ? '' : sources(path);
      return entry.name.endsWith('.ts') && !entry.name.endsWith('.test.ts') ? readFileSync(path, 'utf8') : '';
    })
    .join('\n');
}

describe('observability profile', () => {
  it('adds Prometheus, the collector and Grafana under the profile, with their mounted files present', () => {
    for (const name of ['prometheus', 'otel-collector', 'grafana']) {
      const service = compose.services[name]!;
      expect(service.profiles).toEqual(['observability']);
      for (const volume of service.volumes ?? []) {
        const host = volume.split(':')[0]!;
        if (host.startsWith('./')) expect([volume, existsSync(join(ROOT, host))]).toEqual([volume, true]);
      }
    }
  });

  it('scrapes the gateway, the session API and every worker at the ports compose gives them', () => {
    if (existsSync('/usr/bin/promtool')) {
      execFileSync('/usr/bin/promtool', ['check', 'config', join(DIR, 'prometheus.yml')], { stdio: 'pipe' });
    }
    const config = parse(readFileSync(join(DIR, 'prometheus.yml'), 'utf8')) as {
      scrape_configs: Array<{
        job_name: string;
        static_configs?: Array<{ targets: string[] }>;
        dns_sd_configs?: Array<{ names: string[]; port: number }>;
      }>;
    };
    const targets = config.scrape_configs.flatMap((job) => [
      ...(job.static_configs ?? []).flatMap((s) => s.targets),
      ...(job.dns_sd_configs ?? []).flatMap((d) => d.names.map((name) => `${name}:${d.port}`)),
    ]);
    const env = (name: string) => compose.services[name]!.environment ?? {};
    expect(targets.sort()).toEqual(
      [
        `inference-gateway:${env('inference-gateway').GATEWAY_PORT}`,
        `agent-session-api:${env('agent-session-api').SESSIONS_PORT}`,
        `agent-session-worker:${env('agent-session-worker').METRICS_PORT}`,
      ].sort(),
    );
  });

  it('receives OTLP over HTTP on 4318 into a traces pipeline', () => {
    const config = parse(readFileSync(join(DIR, 'otel-collector.yaml'), 'utf8')) as {
      receivers: { otlp: { protocols: { http: { endpoint: string } } } };
      service: { pipelines: { traces: { receivers: string[]; exporters: string[] } } };
    };
    expect(config.receivers.otlp.protocols.http.endpoint).toBe('0.0.0.0:4318');
    expect(config.service.pipelines.traces.receivers).toContain('otlp');
    expect(config.service.pipelines.traces.exporters.length).toBeGreaterThan(0);
  });

  it('has a provisioned dashboard whose every query names series the services export', () => {
    const dashboard = JSON.parse(readFileSync(join(DIR, 'grafana', 'dashboards', 'tollway.json'), 'utf8')) as {
      panels: Array<{ title: string; targets: Array<{ expr: string }> }>;
    };
    const code = sources(join(ROOT, 'packages')) + sources(join(ROOT, 'services'));
    const titles = dashboard.panels.map((panel) => panel.title).join(' | ');
    for (const topic of [
      'Time to first token',
      'Time per output token',
      'Tokens per second',
      'refusals',
      'Turns',
      'queue',
      'Workers',
      'Routing',
    ]) {
      expect(titles).toContain(topic);
    }
    const series = new Set(
      dashboard.panels.flatMap((panel) =>
        panel.targets.flatMap((target) => {
          // Label names (in `by (…)` and `{…}`) share the gen_ai_ prefix: only series names are kept.
          const expr = target.expr.replace(/by \([^)]*\)/g, '').replace(/\{[^}]*\}/g, '');
          return [...expr.matchAll(/\b((?:gen_ai|tollway)_[a-z_]+)/g)].map((m) => m[1]!);
        }),
      ),
    );
    expect(series.size).toBeGreaterThan(10);
    for (const name of series) {
      const family = name.replace(/_(bucket|sum|count)$/, '');
      // gen_ai_* families are built from the semconv table (dots → underscores + unit suffix).
      const known = code.includes(`'${family}'`) || code.includes(`prometheus: '${family}'`);
      expect([name, known]).toEqual([name, true]);
    }
  });
});
