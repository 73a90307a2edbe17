/**
 * Debian's headless Chromium (/usr/bin/chromium; `.ci/run` installs it when missing), driven by
 * playwright-core, to look at a page as a person's browser draws it. Never a downloaded browser:
 * the executable is the system's, with a fresh profile each time and nothing reaching out (no
 * sync, updates, QUIC or background networking).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type Page } from 'playwright-core';

export const CHROMIUM = '/usr/bin/chromium';

const FLAGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

/** Opens a page in a fresh Chromium profile, runs `use`, and closes everything however it ends. */
export async function withChromiumPage<T>(use: (page: Page) => Promise<T>): Promise<T> {
  const profile = mkdtempSync(join(tmpdir(), 'slab-chromium-'));
  // launchPersistentContext is playwright's way to give Chromium its --user-data-dir.
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    args: FLAGS,
    viewport: { width: 1000, height: 800 },
  });
  try {
    const page = context.pages()[0] ?? (await context.newPage());
    return await use(page);
  } finally {
    await context.close();
    rmSync(profile, { recursive: true, force: true });
  }
}
