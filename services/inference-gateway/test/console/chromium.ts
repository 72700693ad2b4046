import { chromium, type Browser } from 'playwright-core';

/**
 * Debian's chromium, headless, through playwright-core, with the flags this machine needs: no
 * sandbox (root), and none of the background connections its closed network would refuse by the
 * dozen. launch() gives the browser a fresh temporary profile of its own and removes it on close.
 * Used by the console's browser test and by scripts/console-screenshot.mjs.
 */
export function launchChromium(): Promise<Browser> {
  return chromium.launch({
    executablePath: '/usr/bin/chromium',
    headless: true,
    args: [
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  });
}
