/**
 * The adversarial suite's long profile: the generators and oracles of packages/adversarial (the
 * jest profile's) against both built services, counting instead of stopping at the first failure.
 *
 *   pnpm fuzz [--cases 20000] [--seed N] [--batch 200] [--case gateway:123] [--skip 'hostile engine, stream']
 *
 * Half the cases go to each service, in rounds of `--batch` per service; after each round both
 * services are probed, their RSS read, and the session and billing ledgers checked (see Campaign). A crashed
 * service is started again and counted. Prints every finding (seed and case index replay it with
 * `--case`), writes them to bench/results/fuzz-<seed>.jsonl, and ends with the line
 * `N sent, N 4xx, N 5xx, N crashes, N hangs` and the RSS peaks. Exits 1 when anything broke a rule.
 *
 * Environment: FUZZ_PREFIX (Redis key prefix base), FUZZ_RSS_LIMIT_MB, REDIS_URL (see fuzz-config.ts).
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  Campaign,
  CaseStream,
  Platform,
  describeCase,
  ensureBuilt,
  loadFuzzConfig,
} from '../packages/adversarial/src/index.ts';

const here = path.dirname(fileURLToPath(import.meta.url));
const args = parseArgs(process.argv.slice(2));
const config = loadFuzzConfig();
const seed = args.seed !== undefined ? Number(args.seed) : config.seed;
const totalCases = Number(args.cases ?? 20_000);
const batch = Number(args.batch ?? 200);
/** `--skip 'a|b'`: endpoints (by a part of their template name) left out, e.g. while a finding on them is open. */
const skip = typeof args.skip === 'string' ? args.skip.split('|').filter(Boolean) : [];
let skipped = 0;
const streams = { gateway: new CaseStream('gateway', seed), sessions: new CaseStream('sessions', seed) };
const caseAt = (service, index) => streams[service].at(index);
function parseArgs(argv) {
  const out = {};
  for (let i = 0; i < argv.length; i += 1) {
    if (!argv[i].startsWith('--')) continue;
    const value = argv[i + 1];
    if (value === undefined || value.startsWith('--')) out[argv[i].slice(2)] = true;
    else {
      out[argv[i].slice(2)] = value;
      i += 1;
    }
  }
  return out;
}

const mib = (bytes) => `${(bytes / 2 ** 20).toFixed(0)} MiB`;

async function main() {
  ensureBuilt((line) => console.log(`fuzz: ${line}`));
  const platform = new Platform({
    prefixBase: config.prefixBase,
    redisUrl: config.redisUrl,
    baseEnv: config.serviceEnv,
  });
  await platform.start();
  const campaign = new Campaign(platform, {
    caseTimeoutMs: 10_000,
    rssLimitBytes: config.rssLimitBytes,
    settleMs: 20_000,
  });
  const sampler = setInterval(() => {
    platform.gateway.sampleRss();
    platform.sessions.sampleRss();
  }, 250);
  const started = Date.now();
  const printFinding = (finding) =>
    console.log(
      `\nFINDING (${finding.origin})\n  ${finding.request}\n  → ${finding.outcome}\n${finding.problems.map((p) => `  [${p.rule}] ${p.detail}`).join('\n')}`,
    );
  let printed = 0;
  const flush = () => {
    while (printed < campaign.findings.length) printFinding(campaign.findings[printed++]);
  };

  try {
    if (args.case) {
      const [service, index] = args.case.split(':');
      const c = caseAt(service, Number(index));
      console.log(
        `fuzz: replaying seed ${seed} ${service} case ${index}: ${describeCase(c, { ...platform.context, port: platform.service(service).port })}`,
      );
      await campaign.run(c, `--seed ${seed} --case ${args.case}`);
      await campaign.checkpoint('after the replayed case');
    } else {
      console.log(`fuzz: seed ${seed}, ${totalCases} cases, prefix ${platform.prefix}`);
      const perService = Math.ceil(totalCases / 2);
      for (let from = 0; from < perService; from += batch) {
        const to = Math.min(perService, from + batch);
        const lane = async (service) => {
          for (let i = from; i < to; i += 1) {
            const c = caseAt(service, i);
            // Drawn all the same, so every other case keeps its index (and its replay).
            if (skip.some((part) => c.endpoint.includes(part))) skipped += 1;
            else await campaign.run(c, `--seed ${seed} --case ${service}:${i}`);
          }
        };
        await Promise.all([lane('gateway'), lane('sessions')]);
        await campaign.checkpoint(`checkpoint after case ${to - 1} of each service (seed ${seed})`);
        flush();
        const seconds = (Date.now() - started) / 1000;
        console.log(`fuzz: ${campaign.summaryLine()} — ${(campaign.tally.sent / seconds).toFixed(1)} cases/s`);
      }
    }
  } finally {
    clearInterval(sampler);
    flush();
    const seconds = (Date.now() - started) / 1000;
    const resultsDir = path.join(here, 'results');
    mkdirSync(resultsDir, { recursive: true });
    const out = path.join(resultsDir, `fuzz-${seed}.jsonl`);
    writeFileSync(
      out,
      campaign.findings.map((f) => JSON.stringify(f)).join('\n') + (campaign.findings.length ? '\n' : ''),
    );
    const t = campaign.tally;
    console.log(
      `\nfuzz: seed ${seed}, ${seconds.toFixed(0)} s, ${(t.sent / seconds).toFixed(1)} cases/s; 2xx ${t['2xx']}, 3xx ${t['3xx']}, upstream 502/504 ${t.upstream}, closed without answer ${t.closed}, skipped ${skipped}${skip.length ? ` (${skip.join(', ')})` : ''}; ` +
        `rule breaks ${JSON.stringify(t.problems)}; findings in ${path.relative(process.cwd(), out)}`,
    );
    console.log(
      `RSS peak: gateway ${mib(platform.gateway.peakRss)}, sessions (API + embedded worker) ${mib(platform.sessions.peakRss)}`,
    );
    console.log(`billing: ${campaign.billing.summary()}`);
    console.log(campaign.summaryLine());
    await platform.stop();
    process.exitCode = campaign.findings.length > 0 ? 1 : 0;
  }
}

await main();
