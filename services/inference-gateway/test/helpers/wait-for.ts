/**
 * Resolves once `check` holds, checking every `everyMs`; rejects after `ms` (what a test waits on
 * happens in another process or after a write it cannot await).
 */
export async function waitFor(check: () => boolean | Promise<boolean>, ms = 2000, everyMs = 5): Promise<void> {
  const until = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > until) throw new Error(`condition not met within ${ms} ms`);
    await new Promise((resolve) => setTimeout(resolve, everyMs));
  }
}
