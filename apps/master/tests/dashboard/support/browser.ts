import axe from 'axe-core';
import { existsSync, mkdirSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium, type Browser, type BrowserContext, type ConsoleMessage, type Page } from 'playwright-core';

/*
 * A real browser for the dashboard tests: Debian's Chromium driven by
 * playwright-core (Playwright's own browser downloads are never used).
 * scripts/ensure-chromium.sh installs it; a missing browser fails the
 * suite loudly, it is never skipped. Every page collects its console
 * errors and Content-Security-Policy violations, so a test can assert that
 * the strict policy blocked nothing the dashboard needs.
 */

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..', '..', '..', '..');
/** Screenshots land here (a test artifact, under the repository's .test-results/). */
const ARTIFACTS = join(root, '.test-results', 'dashboard');

function chromiumPath(): string {
  const path = process.env['ODUFLOW_CHROMIUM'] ?? '/usr/bin/chromium';
  if (!existsSync(path)) throw new Error(`Chromium is missing at ${path}: run scripts/ensure-chromium.sh (as root it installs Debian's chromium), or set ODUFLOW_CHROMIUM`);
  return path;
}

export async function launchBrowser(): Promise<Browser> {
  return chromium.launch({
    executablePath: chromiumPath(),
    headless: true,
    // Chromium's sandbox cannot run as root (CI runs as root); the pages are our own, on loopback.
    args: process.getuid?.() === 0 ? ['--no-sandbox'] : [],
    timeout: 30_000,
  });
}

export interface WatchedPage {
  readonly page: Page;
  readonly context: BrowserContext;
  /** Console errors and CSP violations seen so far. */
  readonly problems: string[];
}

/** A fresh context (its own sessionStorage) at a laptop's screen size. */
export async function openPage(browser: Browser, baseURL: string): Promise<WatchedPage> {
  const context = await browser.newContext({ baseURL, viewport: { width: 1440, height: 900 }, deviceScaleFactor: 1, colorScheme: 'light', reducedMotion: 'reduce' });
  const page = await context.newPage();
  page.setDefaultTimeout(15_000);
  const problems: string[] = [];
  page.on('console', (message: ConsoleMessage) => {
    if (message.type() === 'error') problems.push(message.text());
  });
  page.on('pageerror', (error) => problems.push(`page error: ${error.message}`));
  return { page, context, problems };
}

export async function screenshot(page: Page, name: string): Promise<string> {
  mkdirSync(ARTIFACTS, { recursive: true });
  const path = join(ARTIFACTS, `${name}.png`);
  await page.screenshot({ path, fullPage: true });
  return path;
}

export interface AxeViolation {
  readonly id: string;
  readonly impact: string | null | undefined;
  readonly help: string;
  readonly targets: readonly string[];
}

/**
 * Runs axe-core (WCAG 2.x A and AA rules) on the page as it is now. The
 * engine is evaluated through the DevTools protocol, which a page's CSP
 * does not govern, so the page keeps its strict policy while it is checked.
 */
export async function axeViolations(page: Page): Promise<AxeViolation[]> {
  await page.evaluate(axe.source);
  // In-page code is given as text: this package is type-checked for Node, without the DOM's types.
  const rules = JSON.stringify({ runOnly: { type: 'tag', values: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa', 'best-practice'] } });
  const results = await page.evaluate<axe.AxeResults>(`axe.run(document, ${rules})`);
  return results.violations.map((v) => ({ id: v.id, impact: v.impact, help: v.help, targets: v.nodes.map((n) => n.target.join(' ')) }));
}
