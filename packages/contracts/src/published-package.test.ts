/**
 * The package as an outside client gets it: both builds are compiled into a temporary
 * `node_modules/@tollway/contracts` (no source condition, no tsx), then imported with plain Node
 * as ESM and as CommonJS. The README's webhook receiver (examples/webhook-receiver.mjs) runs
 * there as a real process, and gets signed, badly signed and invalid payloads.
 */
import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import {
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  realpathSync,
  rmSync,
  symlinkSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { Webhook } from 'standardwebhooks';

const run = promisify(execFile);
const PACKAGE_DIR = join(__dirname, '..');
const ROOT = join(PACKAGE_DIR, '..', '..');
const EXAMPLE = join(PACKAGE_DIR, 'examples', 'webhook-receiver.mjs');
const SECRET = `whsec_${randomBytes(24).toString('base64')}`;
const TOKEN = 'receiver-token';

let home = '';

/** Lays out `<home>/node_modules/@tollway/contracts` from fresh ESM and CJS builds. */
async function installBuiltPackage(): Promise<void> {
  home = mkdtempSync(join(tmpdir(), 'tollway-contracts-'));
  const modules = join(home, 'node_modules');
  const pkg = join(modules, '@tollway', 'contracts');
  mkdirSync(pkg, { recursive: true });
  const tsc = join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc');
  await Promise.all([
    run(process.execPath, [tsc, '-p', join(PACKAGE_DIR, 'tsconfig.esm.json'), '--outDir', join(pkg, 'dist', 'esm')]),
    run(process.execPath, [tsc, '-p', join(PACKAGE_DIR, 'tsconfig.cjs.json'), '--outDir', join(pkg, 'dist', 'cjs')]),
  ]);
  await run(process.execPath, [join(ROOT, 'scripts', 'mark-dual-package.mjs'), join(pkg, 'dist')]);
  copyFileSync(join(PACKAGE_DIR, 'package.json'), join(pkg, 'package.json'));
  for (const dependency of ['zod', 'standardwebhooks']) {
    symlinkSync(realpathSync(join(PACKAGE_DIR, 'node_modules', dependency)), join(modules, dependency), 'dir');
  }
  copyFileSync(EXAMPLE, join(home, 'webhook-receiver.mjs'));
}

function node(args: string[]): Promise<string> {
  return run(process.execPath, args, { cwd: home }).then(({ stdout }) => stdout.trim());
}

beforeAll(installBuiltPackage, 60_000);

afterAll(() => {
  if (home) rmSync(home, { recursive: true, force: true });
});

describe('the built package', () => {
  const probe =
    "WebhookPayload.safeParse({}).success + ' ' + buildInferenceOpenApi().info.version + ' ' + FINISH_REASONS.length";

  it('imports as ESM with plain Node', async () => {
    const code = `import { WebhookPayload, buildInferenceOpenApi, FINISH_REASONS } from '@tollway/contracts'; console.log(${probe});`;
    expect(await node(['--input-type=module', '-e', code])).toBe('false 2026-09-17 4');
  });

  it('requires as CommonJS with plain Node', async () => {
    const code = `const { WebhookPayload, buildInferenceOpenApi, FINISH_REASONS } = require('@tollway/contracts'); console.log(${probe});`;
    expect(await node(['-e', code])).toBe('false 2026-09-17 4');
  });

  it('ships type declarations for both, and no tests', () => {
    const pkg = join(home, 'node_modules', '@tollway', 'contracts', 'dist');
    expect(existsSync(join(pkg, 'esm', 'index.d.ts'))).toBe(true);
    expect(existsSync(join(pkg, 'cjs', 'index.d.ts'))).toBe(true);
    expect(existsSync(join(pkg, 'esm', 'published-package.test.js'))).toBe(false);
  });

  it('depends on zod alone at run time', () => {
    const manifest = JSON.parse(readFileSync(join(PACKAGE_DIR, 'package.json'), 'utf8')) as { dependencies: object };
    expect(Object.keys(manifest.dependencies)).toEqual(['zod']);
  });
});

describe('the README webhook receiver', () => {
  const payload = {
    session_id: '0b6c3c3e-5d7a-4f0e-9a53-2f4d7a1c9e11',
    status: 'idle',
    response: { role: 'assistant', content: 'All done' },
    error: null,
    messages: null,
    trace_metrics: { trace_id: null, total_duration: 0.5, total_tokens: 12, has_error: false },
  };
  let child: ChildProcess;
  let url = '';
  let output = '';

  beforeAll(async () => {
    child = spawn(process.execPath, ['webhook-receiver.mjs'], {
      cwd: home,
      env: { ...process.env, PORT: '0', WEBHOOK_SIGNING_SECRET: SECRET, WEBHOOK_TOKEN: TOKEN },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    child.stdout!.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
    const port = await new Promise<string>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`receiver did not start: ${output}`)), 20_000);
      child.stdout!.on('data', () => {
        const match = /listening on (\d+)/.exec(output);
        if (match) {
          clearTimeout(timer);
          resolve(match[1]!);
        }
      });
      child.once('exit', (code) => {
        clearTimeout(timer);
        reject(new Error(`receiver exited with ${code}`));
      });
    });
    url = `http://127.0.0.1:${port}/`;
  });

  afterAll(async () => {
    if (child && child.exitCode === null) {
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.kill();
      await exited;
    }
  });

  const post = (body: string, headers: Record<string, string>) =>
    fetch(url, { method: 'POST', body, headers: { 'content-type': 'application/json', ...headers } });

  function signed(body: string, secret = SECRET): Record<string, string> {
    const id = `msg_${randomBytes(8).toString('hex')}`;
    const at = new Date();
    return {
      authorization: `Bearer ${TOKEN}`,
      'webhook-id': id,
      'webhook-timestamp': String(Math.floor(at.getTime() / 1000)),
      'webhook-signature': new Webhook(secret).sign(id, at, body),
    };
  }

  it('is the code the README shows', () => {
    const readme = readFileSync(join(PACKAGE_DIR, 'README.md'), 'utf8');
    expect(readme).toContain(readFileSync(EXAMPLE, 'utf8').trim());
  });

  it('accepts a signed, valid payload', async () => {
    const body = JSON.stringify(payload);
    expect((await post(body, signed(body))).status).toBe(204);
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(output).toContain(`session ${payload.session_id} answered: All done`);
  });

  it('refuses a wrong bearer token', async () => {
    const body = JSON.stringify(payload);
    expect((await post(body, { ...signed(body), authorization: 'Bearer nope' })).status).toBe(401);
  });

  it('refuses a signature made with another secret, and a body changed after signing', async () => {
    const body = JSON.stringify(payload);
    const other = `whsec_${randomBytes(24).toString('base64')}`;
    expect((await post(body, signed(body, other))).status).toBe(401);
    const tampered = JSON.stringify({ ...payload, response: { role: 'assistant', content: 'forged' } });
    expect((await post(tampered, signed(body))).status).toBe(401);
  });

  it('answers 400 naming the path of a payload that does not fit the schema', async () => {
    const body = JSON.stringify({ ...payload, status: 'running' });
    const res = await post(body, signed(body));
    expect(res.status).toBe(400);
    expect(((await res.json()) as { issues: Array<{ path: string }> }).issues.map((i) => i.path)).toEqual(['status']);
  });
});
