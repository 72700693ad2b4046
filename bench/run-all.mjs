#!/usr/bin/env node
// `pnpm bench`: runs every bench/*.mjs script except this one, one after another (benchmarks
// sharing two cores would measure each other), and prints their output as it comes. Arguments
// are name filters (`pnpm bench gateway` runs only the scripts whose file name contains "gateway")
// and options, passed on to every script with their values (`pnpm bench --dist --seconds 10`).
// Exits non-zero when any script fails, after running the rest.
import { spawn } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const self = basename(fileURLToPath(import.meta.url));
const args = process.argv.slice(2).filter((arg) => arg !== '--');
const optionAt = args.findIndex((arg) => arg.startsWith('--'));
const filters = optionAt === -1 ? args : args.slice(0, optionAt);
const options = optionAt === -1 ? [] : args.slice(optionAt);

// The adversarial long profile (`pnpm fuzz`) is no benchmark: it runs only when named (`pnpm bench fuzz`).
const scripts = readdirSync(here)
  .filter((name) => name.endsWith('.mjs') && name !== self)
  .filter((name) => name !== 'fuzz.mjs' || filters.includes('fuzz'))
  .filter((name) => filters.length === 0 || filters.some((filter) => name.includes(filter)))
  .sort();

if (scripts.length === 0) {
  console.error(`No bench scripts found in ${here}${filters.length ? ` matching ${filters.join(', ')}` : ''}.`);
  process.exit(1);
}

function run(script) {
  return new Promise((resolve) => {
    const started = Date.now();
    console.log(`\n=== ${script} ===`);
    // Some scripts import the services' TypeScript sources (e.g. the session store): load tsx and
    // resolve workspace packages to their sources, as in development.
    const child = spawn(
      process.execPath,
      ['--conditions=@tollway/source', '--import', 'tsx', join(here, script), ...options],
      {
        cwd: join(here, '..'),
        stdio: 'inherit',
      },
    );
    child.on('error', (err) => resolve({ script, ok: false, detail: err.message, ms: Date.now() - started }));
    child.on('exit', (code, signal) =>
      resolve({ script, ok: code === 0, detail: signal ?? `exit ${code}`, ms: Date.now() - started }),
    );
  });
}

const results = [];
for (const script of scripts) results.push(await run(script));

console.log('\n=== summary ===');
for (const { script, ok, detail, ms } of results) {
  console.log(`${ok ? 'ok  ' : 'FAIL'}  ${script}  (${(ms / 1000).toFixed(1)} s${ok ? '' : `, ${detail}`})`);
}
process.exit(results.every((r) => r.ok) ? 0 : 1);
