import { mkdirSync } from 'node:fs';
import path from 'node:path';
import OpenAI from 'openai';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { sessionSchedulerKeys } from '@tollway/accounts';
import { launchChromium } from './chromium';
import { ADMIN_TOKEN, buildConsole, ROOMY_BUDGETS, startConsoleGateway, type ConsoleGateway } from './console-harness';

// The console in a real browser (Debian's chromium through playwright-core): the whole key
// lifecycle with the official openai SDK, organization isolation through the page, accessibility
// (axe-core) and screenshots of every page at phone and desktop widths. One browser for the file.
jest.setTimeout(120_000);

const ARTIFACTS = path.resolve(__dirname, '..', '..', '..', '..', 'artifacts', 'console');
const HOSTILE = '<img src=x onerror=alert(1)>';
const KEY_CAP = 6;
const WIDTHS = { phone: { width: 390, height: 844 }, desktop: { width: 1280, height: 900 } };

let gateway: ConsoleGateway;
let built: Awaited<ReturnType<typeof buildConsole>>;
let browser: Browser;
const dialogs: string[] = [];

beforeAll(async () => {
  mkdirSync(ARTIFACTS, { recursive: true });
  built = await buildConsole();
  // A cap on keys per organization that no other test here reaches (see the key-limit test).
  gateway = await startConsoleGateway({ CONSOLE_DIR: built.dir, MAX_KEYS_PER_ORGANIZATION: String(KEY_CAP) });
  browser = await launchChromium();
}, 90_000);

afterAll(async () => {
  await browser?.close();
  await gateway?.close();
  built?.remove();
});

/** A fresh browser profile (own cookies) that records CSP violations, alerts and page errors. */
async function newContext(viewport = WIDTHS.desktop): Promise<{ context: BrowserContext; page: Page }> {
  const context = await browser.newContext({ viewport, permissions: ['clipboard-read', 'clipboard-write'] });
  // Init scripts come in through DevTools, not the page, so the CSP does not stop them.
  await context.addInitScript({ path: require.resolve('axe-core/axe.min.js') });
  await context.addInitScript(() => {
    window.cspViolations = [];
    document.addEventListener('securitypolicyviolation', (e) => {
      window.cspViolations.push(`${e.violatedDirective} ${e.blockedURI}`);
    });
  });
  const page = await context.newPage();
  page.on('dialog', (dialog) => {
    dialogs.push(dialog.message());
    void dialog.dismiss();
  });
  page.on('pageerror', (err) => dialogs.push(`pageerror: ${err.message}`));
  return { context, page };
}

async function signIn(page: Page, token: string): Promise<void> {
  await page.goto(`${gateway.baseUrl}/console/`);
  await page.getByLabel('Admin token or organization admin key').fill(token);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByRole('button', { name: 'Sign out' }).waitFor();
}

async function signOut(page: Page): Promise<void> {
  await page.getByRole('button', { name: 'Sign out' }).click();
  await page.getByRole('button', { name: 'Sign in' }).waitFor();
}

/** Creates a key on the keys page and returns its secret, read from the once-only panel. */
async function createKey(page: Page, name: string, role: 'standard' | 'admin'): Promise<string> {
  await page.getByLabel('Name (optional)').fill(name);
  await page.getByLabel('Role').selectOption(role);
  await page.getByRole('button', { name: 'Create key' }).click();
  const secret = page.locator('#new-key-value');
  await secret.waitFor();
  const key = await secret.inputValue();
  await page.getByRole('button', { name: 'Copy key' }).click();
  await page.getByRole('button', { name: 'Copied' }).waitFor();
  expect(await page.evaluate(() => navigator.clipboard.readText())).toBe(key);
  await page.getByRole('button', { name: 'Done, I stored it' }).click();
  await expect(page.locator('#new-key-value').count()).resolves.toBe(0);
  return key;
}

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

async function cspViolations(page: Page): Promise<string[]> {
  return page.evaluate(() => window.cspViolations);
}

describe('the console in chromium', () => {
  it('operator → organization and admin key → org admin → key → openai SDK → usage chart → revoke → 401', async () => {
    const { context, page } = await newContext();
    await signIn(page, ADMIN_TOKEN);
    await page.getByRole('heading', { name: 'Organizations', level: 1 }).waitFor();

    // Create an organization whose name is hostile markup: it must render as text.
    await page.getByLabel('Name', { exact: true }).fill(HOSTILE);
    await page.getByLabel('Requests per minute').fill('-1');
    await page.getByRole('button', { name: 'Create organization' }).click();
    // The form checks with the API's schema before sending anything.
    await expect(page.locator('#requests-error').textContent()).resolves.toMatch(/>=\s*0/);
    await page.getByLabel('Requests per minute').fill('100');
    await page.getByRole('button', { name: 'Create organization' }).click();
    const row = page.getByRole('row', { name: new RegExp(HOSTILE.replace(/[()]/g, '\\$&')) });
    await row.waitFor();
    expect(await page.locator('img[src="x"]').count()).toBe(0);
    const orgs = await gateway.store.listOrganizations();
    const org = orgs.find((o) => o.name === HOSTILE)!;
    expect(org).toBeDefined();

    await row.getByRole('link', { name: `Keys of ${HOSTILE}` }).click();
    await page.getByRole('heading', { name: /API keys/, level: 1 }).waitFor();
    const adminKey = await createKey(page, 'console admin', 'admin');
    expect(adminKey).toMatch(/^tw-/);
    await signOut(page);

    // The organization admin signs in with that key and lands on its own keys.
    await signIn(page, adminKey);
    await page.getByText(`Admin of ${org.id}`).waitFor();
    await page.getByRole('heading', { name: /API keys/, level: 1 }).waitFor();
    const appKey = await createKey(page, 'app key', 'standard');
    const keyRow = page.getByRole('row', { name: /app key/ });
    await expect(keyRow.getByRole('cell').nth(3).textContent()).resolves.toBe('Never');
    // The secret is gone from the page once dismissed.
    expect(await page.content()).not.toContain(appKey);

    const client = new OpenAI({ apiKey: appKey, baseURL: `${gateway.baseUrl}/v1`, maxRetries: 0 });
    const reply = await client.chat.completions.create({
      model: 'tollway/sim-chat',
      messages: [{ role: 'user', content: 'Hello from the console test' }],
      max_tokens: 8,
    });
    expect(reply.choices[0]?.message.content).toBeTruthy();

    await page.getByRole('link', { name: 'Usage' }).click();
    await page.getByRole('heading', { name: /Usage/, level: 1 }).waitFor();
    // The page refreshes itself while open: the request shows up without a reload.
    await page.getByTestId('total-requests').filter({ hasText: /^1$/ }).waitFor({ timeout: 15_000 });
    const chart = page.getByRole('figure', { name: /Requests per minute: 1 requests in the last hour/ });
    await chart.waitFor();
    await expect(chart.locator('canvas').count()).resolves.toBe(1);
    await page.getByRole('row', { name: /tollway\/sim-chat/ }).waitFor();
    await page.screenshot({ path: path.join(ARTIFACTS, 'usage-with-traffic-desktop.png'), fullPage: true });

    await page.getByRole('link', { name: 'Keys' }).click();
    await expect(keyRow.getByRole('cell').nth(3).textContent()).resolves.not.toBe('Never');
    await keyRow.getByRole('button', { name: /Revoke key/ }).click();
    const confirm = page.getByRole('dialog', { name: 'Revoke key' });
    await confirm.waitFor();
    await confirm.getByRole('button', { name: 'Revoke key' }).click();
    await keyRow.getByText(/^Revoked/).waitFor();
    await page
      .locator('#announcer')
      .filter({ hasText: /revoked/ })
      .waitFor();

    // Revocation reaches the gateway's key cache at once (pub/sub), well within a second.
    const deadline = Date.now() + 1000;
    let status = 0;
    while (Date.now() < deadline) {
      const err = await client.models.list().then(
        () => null,
        (e: unknown) => e,
      );
      if (err instanceof OpenAI.AuthenticationError) {
        status = err.status;
        break;
      }
    }
    expect(status).toBe(401);
    await expect(
      client.chat.completions.create({ model: 'tollway/sim-chat', messages: [{ role: 'user', content: 'again' }] }),
    ).rejects.toBeInstanceOf(OpenAI.AuthenticationError);

    expect(await cspViolations(page)).toEqual([]);
    expect(dialogs).toEqual([]);
    await context.close();
  });

  it("shows the admin API's refusal when an organization holds MAX_KEYS_PER_ORGANIZATION keys", async () => {
    const org = await gateway.store.createOrganization({ name: 'Full', budgets: ROOMY_BUDGETS, credit: 1 });
    const admin = await gateway.store.createKey(org.id, 'admin', 'admin');
    for (let i = 1; i < KEY_CAP - 1; i++) await gateway.store.createKey(org.id, `k${i}`);
    const { context, page } = await newContext();
    await signIn(page, admin!.key);
    await page.getByRole('heading', { name: /API keys/, level: 1 }).waitFor();
    await createKey(page, 'the last one', 'standard');
    await page.getByLabel('Name (optional)').fill('one too many');
    await page.getByRole('button', { name: 'Create key' }).click();
    await page
      .getByRole('alert')
      .filter({ hasText: `Organization '${org.id}' holds ${KEY_CAP} live API keys, the most one may` })
      .waitFor();
    expect(await page.locator('#new-key-value').count()).toBe(0);
    expect(await gateway.store.listKeys(org.id)).toHaveLength(KEY_CAP);
    expect(await cspViolations(page)).toEqual([]);
    await context.close();
  });

  it('shows an organization admin nothing of another organization, through the page or its API calls', async () => {
    const mine = await gateway.store.createOrganization({ name: 'Mine', budgets: ROOMY_BUDGETS, credit: 1 });
    const theirs = await gateway.store.createOrganization({
      name: 'Their secret org',
      budgets: ROOMY_BUDGETS,
      credit: 1,
    });
    const theirKey = await gateway.store.createKey(theirs.id, 'their-secret-key-name');
    const admin = await gateway.store.createKey(mine.id, 'admin', 'admin');
    const { context, page } = await newContext();
    await signIn(page, admin!.key);

    // The organizations list is the operator's: an org admin is taken to its own keys.
    await page.goto(`${gateway.baseUrl}/console/#/organizations`);
    await page.getByText(`Admin of ${mine.id}`).waitFor();
    await page.getByRole('heading', { name: /API keys/, level: 1 }).waitFor();
    expect(await page.getByRole('link', { name: 'Organizations' }).count()).toBe(0);

    for (const view of ['keys', 'usage']) {
      await page.goto(`${gateway.baseUrl}/console/#/organizations/${theirs.id}/${view}`);
      await page
        .getByRole('alert')
        .filter({ hasText: `No organization '${theirs.id}'` })
        .first()
        .waitFor();
      const text = await page.locator('main').innerText();
      expect(text).not.toContain('Their secret org');
      expect(text).not.toContain('their-secret-key-name');
      expect(text).not.toContain(theirKey!.last4);
    }
    // A link with a broken percent-escape (cut short) opens on the admin's own keys, not a blank page.
    await page.goto('about:blank');
    await page.goto(`${gateway.baseUrl}/console/#/organizations/%E0%A4%A/keys`);
    await page.getByText(`Admin of ${mine.id}`).waitFor();
    await page.getByRole('heading', { name: /API keys/, level: 1 }).waitFor();
    // The page's own session cannot be talked into it either: the API answers 404 / 403.
    const answers = await page.evaluate(async (id) => {
      const session = (await (await fetch('/console/api/session')).json()) as { csrf_token: string };
      const headers = { 'x-csrf-token': session.csrf_token, 'content-type': 'application/json' };
      return Promise.all([
        fetch(`/admin/v1/organizations/${id}/keys`).then((r) => r.status),
        fetch(`/admin/v1/organizations/${id}/keys`, { method: 'POST', headers, body: '{}' }).then((r) => r.status),
        fetch('/admin/v1/organizations').then((r) => r.status),
        fetch(`/admin/v1/organizations/${id}`, { method: 'PATCH', headers, body: '{"credit_top_up":5}' }).then(
          (r) => r.status,
        ),
      ]);
    }, theirs.id);
    expect(answers).toEqual([404, 404, 403, 404]);
    expect(await cspViolations(page)).toEqual([]);
    await context.close();
  });

  it('shows session limits and live turns; the operator edits them with the budgets, an organization admin only reads them', async () => {
    const name = `${HOSTILE} limits`;
    const org = await gateway.store.createOrganization({
      name,
      budgets: ROOMY_BUDGETS,
      credit: 1,
      sessionLimits: { sessions: 12, runningTurns: 4 },
    });
    const admin = await gateway.store.createKey(org.id, 'limits admin', 'admin');
    // The session service's own keys of the organization, as it keeps them.
    const scheduler = sessionSchedulerKeys(gateway.prefix);
    await gateway.redis.zadd(scheduler.sessions(org.id), 1, 'sess_1', 2, 'sess_2', 3, 'sess_3');
    await gateway.redis.hset(scheduler.scheduler(org.id), { running: '4', waiting: '1234567' });

    const { context, page } = await newContext();
    await signIn(page, ADMIN_TOKEN);
    const row = page.getByRole('row', { name: new RegExp(escapeRegExp(name)) });
    await row.waitFor();
    const cells = row.getByRole('cell');
    await expect(cells.nth(4).innerText()).resolves.toBe('3 held\nlimit 12');
    await expect(cells.nth(5).innerText()).resolves.toBe(
      '4 running, 1,234,567 waiting\nrunning limit 4\nwaiting limit service default\nweight service default',
    );

    await row.getByRole('button', { name: `Edit budgets and limits of ${name}` }).click();
    const dialog = page.getByRole('dialog', { name: 'Edit budgets and limits' });
    await dialog.waitFor();
    await expect(dialog.getByLabel('Sessions held at most').inputValue()).resolves.toBe('12');
    await expect(dialog.getByLabel('Turns waiting at most').inputValue()).resolves.toBe('');
    // Checked with the API's schema before anything is sent.
    await dialog.getByLabel('Turn weight (1-1000)').fill('1001');
    await dialog.getByRole('button', { name: 'Save' }).click();
    await expect(page.locator('#turn-weight-error').textContent()).resolves.toMatch(/<=\s*1000/);
    await page.screenshot({ path: path.join(ARTIFACTS, 'limits-edit-refused-desktop.png'), fullPage: true });
    expect((await gateway.store.getOrganization(org.id))?.sessionLimits.weight).toBeNull();
    await dialog.getByLabel('Turn weight (1-1000)').fill('3');
    await dialog.getByLabel('Turns running at once').fill('');
    await dialog.getByLabel('Turns waiting at most').fill('50');
    await dialog.getByRole('button', { name: 'Save' }).click();
    await page.locator('#announcer').filter({ hasText: 'Budgets and limits of' }).waitFor();
    expect((await gateway.store.getOrganization(org.id))?.sessionLimits).toEqual({
      sessions: 12,
      runningTurns: null,
      waitingTurns: 50,
      weight: 3,
    });
    await cells
      .nth(5)
      .filter({ hasText: /running limit service default\s*waiting limit 50\s*weight 3/ })
      .waitFor();
    await page.screenshot({ path: path.join(ARTIFACTS, 'limits-edited-desktop.png'), fullPage: true });
    expect(await page.locator('img[src="x"]').count()).toBe(0);
    await signOut(page);

    // The organization admin sees them on its usage page, and cannot change them.
    await signIn(page, admin!.key);
    await page.getByRole('link', { name: 'Usage' }).click();
    const panel = page.getByRole('region', { name: 'Sessions and turns' });
    await panel.waitFor();
    await expect(panel.getByTestId('turns-sessions').textContent()).resolves.toBe('3');
    await expect(panel.getByTestId('turns-waiting').textContent()).resolves.toBe('1,234,567');
    await expect(panel.getByTestId('turn-weight').textContent()).resolves.toBe('3');
    await panel.getByText('limit service default').waitFor();
    await panel.getByText('limit 50').waitFor();
    // Refreshed while open: the counts follow the session service.
    await gateway.redis.hset(scheduler.scheduler(org.id), { waiting: '0' });
    await panel.getByTestId('turns-waiting').filter({ hasText: /^0$/ }).waitFor({ timeout: 15_000 });
    await page.screenshot({ path: path.join(ARTIFACTS, 'limits-read-only-desktop.png'), fullPage: true });
    expect(await page.getByRole('button', { name: /limits/ }).count()).toBe(0);
    expect(await page.getByRole('textbox').count()).toBe(0);
    const status = await page.evaluate(async (id) => {
      const session = (await (await fetch('/console/api/session')).json()) as { csrf_token: string };
      const headers = { 'x-csrf-token': session.csrf_token, 'content-type': 'application/json' };
      const body = JSON.stringify({ session_limits: { running_turns: 1000000 } });
      return (await fetch(`/admin/v1/organizations/${id}`, { method: 'PATCH', headers, body })).status;
    }, org.id);
    expect(status).toBe(403);
    expect((await gateway.store.getOrganization(org.id))?.sessionLimits.runningTurns).toBeNull();
    expect(await page.locator('img[src="x"]').count()).toBe(0);
    expect(await cspViolations(page)).toEqual([]);
    expect(dialogs).toEqual([]);
    await context.close();
  });

  it('passes axe-core (no serious or critical violation) on every page, at phone and desktop widths', async () => {
    const org = await gateway.store.createOrganization({ name: 'Accessible org', budgets: ROOMY_BUDGETS, credit: 3 });
    await gateway.store.createKey(org.id, 'a key');
    const admin = await gateway.store.createKey(org.id, 'a11y admin', 'admin');
    const pages: Array<{ name: string; token: string | null; hash: string; ready: (p: Page) => Promise<unknown> }> = [
      { name: 'sign-in', token: null, hash: '', ready: (p) => p.getByRole('button', { name: 'Sign in' }).waitFor() },
      {
        name: 'organizations',
        token: ADMIN_TOKEN,
        hash: '#/organizations',
        ready: (p) => p.getByRole('row', { name: /Accessible org/ }).waitFor(),
      },
      {
        name: 'keys',
        token: ADMIN_TOKEN,
        hash: `#/organizations/${org.id}/keys`,
        ready: (p) => p.getByRole('row', { name: /a key/ }).waitFor(),
      },
      {
        name: 'usage',
        token: ADMIN_TOKEN,
        hash: `#/organizations/${org.id}/usage`,
        ready: (p) => p.getByRole('heading', { name: 'Spend per model' }).waitFor(),
      },
      { name: 'models', token: ADMIN_TOKEN, hash: '#/models', ready: (p) => p.getByText(/1 of 1 healthy/).waitFor() },
      {
        name: 'org-admin-keys',
        token: admin!.key,
        hash: `#/organizations/${org.id}/keys`,
        ready: (p) => p.getByRole('row', { name: /a key/ }).waitFor(),
      },
      {
        name: 'org-admin-usage',
        token: admin!.key,
        hash: `#/organizations/${org.id}/usage`,
        ready: (p) => p.getByRole('heading', { name: 'Sessions and turns' }).waitFor(),
      },
      {
        name: 'limits-dialog',
        token: ADMIN_TOKEN,
        hash: '#/organizations',
        ready: async (p) => {
          await p.getByRole('button', { name: 'Edit budgets and limits of Accessible org' }).click();
          await p.getByRole('dialog', { name: 'Edit budgets and limits' }).waitFor();
        },
      },
      {
        name: 'revoke-dialog',
        token: ADMIN_TOKEN,
        hash: `#/organizations/${org.id}/keys`,
        ready: async (p) => {
          await p
            .getByRole('row', { name: /a key/ })
            .getByRole('button', { name: /Revoke key/ })
            .click();
          await p.getByRole('dialog', { name: 'Revoke key' }).waitFor();
        },
      },
    ];
    const failures: string[] = [];
    for (const [widthName, viewport] of Object.entries(WIDTHS)) {
      for (const token of [null, ADMIN_TOKEN, admin!.key]) {
        const { context, page } = await newContext(viewport);
        if (token) await signIn(page, token);
        for (const entry of pages.filter((p) => p.token === token)) {
          await page.goto(`${gateway.baseUrl}/console/${entry.hash}`);
          await entry.ready(page);
          const violations = await page.evaluate(async () => {
            const result = await window.axe.run(document, { resultTypes: ['violations'] });
            return result.violations
              .filter((v) => v.impact === 'serious' || v.impact === 'critical')
              .map((v) => `${v.id} (${v.impact}): ${v.nodes.map((n) => n.target.join(' ')).join(', ')}`);
          });
          failures.push(...violations.map((v) => `${entry.name} @ ${widthName}: ${v}`));
          await page.screenshot({ path: path.join(ARTIFACTS, `${entry.name}-${widthName}.png`), fullPage: true });
          // Nothing overflows the viewport sideways at phone width except inside the scrollable tables.
          const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
          expect(overflow).toBeLessThanOrEqual(0);
        }
        expect(await cspViolations(page)).toEqual([]);
        await context.close();
      }
    }
    expect(failures).toEqual([]);
  });
});

interface AxeResult {
  violations: Array<{ id: string; impact: string | null; nodes: Array<{ target: string[] }> }>;
}

// The functions handed to page.evaluate run in the browser. This project is typed for Node, without
// the DOM library (which would change the types of fetch and Headers everywhere), so the few
// browser globals they use are declared here, for this module only.
declare const window: {
  cspViolations: string[];
  axe: { run: (context: unknown, options: object) => Promise<AxeResult> };
  innerWidth: number;
};
declare const document: {
  addEventListener(
    type: 'securitypolicyviolation',
    listener: (e: { violatedDirective: string; blockedURI: string }) => void,
  ): void;
  documentElement: { scrollWidth: number };
};
declare const navigator: { clipboard: { readText(): Promise<string> } };
