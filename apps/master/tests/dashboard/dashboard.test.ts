import { createFileRecordStore, readRollout, startRollout, type RolloutHandle } from '@oduflow/master-runner';
import { canonicalJson } from '@oduflow/protocol';
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GLOBEX_A, TOKENS, startServiceWorld, waitFor, type ServiceWorld } from '../serve/support/service-world.js';
import { axeViolations, launchBrowser, openPage, screenshot, type WatchedPage } from './support/browser.js';
import { FLEET, ROLLOUT_TARGETS, SEEDED_COUNTS, dashboardTokens, seedFleet, type Seeded } from './support/seed.js';

/*
 * The operator dashboard in a real browser (Debian's Chromium through
 * playwright-core) against a real service: the in-process service world
 * (HTTP on a port, the background loops, the salt-api stand-in) over a
 * seeded file store. Each view is screenshotted under
 * .test-results/dashboard/ and checked with axe-core.
 */

let world: ServiceWorld;
let seeded: Seeded;
let browser: Browser;
let workspace: string;
const opened: WatchedPage[] = [];

beforeAll(async () => {
  workspace = mkdtempSync(join(tmpdir(), 'oduflow-dashboard-rollouts-'));
  chmodSync(workspace, 0o700);
  const registry = dashboardTokens();
  world = await startServiceWorld(
    { tokens: () => registry, pollWalkEveryMs: 3_600_000, dashboard: { rolloutWorkspace: join(workspace, 'ws') } },
    async (root) => {
      const store = await createFileRecordStore({ root, lockWaitMs: 10_000 });
      seeded = await seedFleet(store);
      return store;
    },
  );
  browser = await launchBrowser();
}, 120_000);

afterAll(async () => {
  for (const p of opened) await p.context.close();
  await browser.close();
  await world.close();
  rmSync(workspace, { recursive: true, force: true });
});

async function signedIn(token: string, path = '/ui/'): Promise<WatchedPage> {
  const watched = await openPage(browser, world.service.address);
  opened.push(watched);
  const { page } = watched;
  await page.goto(path);
  await page.getByLabel('Bearer token').fill(token);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByTestId('live-status').filter({ hasText: 'Live' }).waitFor();
  return watched;
}

async function expectAccessible(page: Page): Promise<void> {
  expect(await axeViolations(page)).toEqual([]);
}

/** Marks the document: a reload or a navigation would drop the mark. */
async function mark(page: Page): Promise<void> {
  await page.evaluate("document.documentElement.setAttribute('data-test-mark', 'kept')");
}

async function stillMarked(page: Page): Promise<boolean> {
  return page.evaluate<boolean>("document.documentElement.getAttribute('data-test-mark') === 'kept'");
}

/** In-page code is given as text: this package is type-checked for Node, without the DOM's types. */
async function storedToken(page: Page): Promise<string | null> {
  return page.evaluate<string | null>("sessionStorage.getItem('oduflow.token')");
}

async function attributes(locator: ReturnType<Page['locator']>, name: string): Promise<(string | null)[]> {
  const out: (string | null)[] = [];
  for (let i = 0; i < (await locator.count()); i += 1) out.push(await locator.nth(i).getAttribute(name));
  return out;
}

function countOf(page: Page, state: string) {
  return page.locator(`[data-testid="counts"] li[data-state="${state}"] .count-number`);
}

function idOf(record: { request_id: string }): string {
  return record.request_id;
}

describe('the operator dashboard', () => {
  it('shows the tenant’s counts by state and its blocked targets, the ones waiting for an operator first, and nothing of another tenant', async () => {
    const { page, problems } = await signedIn(TOKENS.acmeRead);
    await page.getByRole('heading', { name: 'Fleet overview' }).waitFor();
    for (const [state, n] of Object.entries(SEEDED_COUNTS)) await expect.poll(() => countOf(page, state).textContent()).toBe(String(n));
    for (const state of ['published', 'running', 'reconciled', 'legacy']) expect(await countOf(page, state).textContent()).toBe('0');
    const rows = page.locator('[data-testid="blocked"] tbody tr');
    expect(await attributes(rows, 'data-minion')).toEqual([FLEET.quarantined, FLEET.unknown, FLEET.uncertain, FLEET.prepared]);
    expect(await page.content()).not.toContain(GLOBEX_A);
    expect(await page.content()).not.toContain(TOKENS.acmeRead);
    await screenshot(page, 'overview');
    await expectAccessible(page);
    expect(problems).toEqual([]);
  });

  it('leads from a blocked target to its blocking request, whose page shows the timeline and the minion’s exact answer', async () => {
    const { page, problems } = await signedIn(TOKENS.acmeRead);
    await page.getByRole('link', { name: `request ${idOf(seeded.unknown)}, blocking ${FLEET.unknown}` }).click();
    await page.waitForURL(`**/ui/requests/${idOf(seeded.unknown)}`);
    await page.getByRole('heading', { name: `Request ${idOf(seeded.unknown)}` }).waitFor();
    const steps = page.locator('[data-testid="timeline"] > li');
    expect(await attributes(steps, 'data-step')).toEqual(['prepared', 'intent', 'publication', 'answer', 'outcome']);
    await expect.poll(() => steps.nth(3).textContent()).toContain('latest answer: unknown');
    expect(await steps.nth(4).textContent()).toContain('never executed again');
    // Every step takes its time and its source from the request's history: creation, intent, ack, the last answer, the outcome.
    const history = await world.store.history(idOf(seeded.unknown));
    const entries = history?.entries ?? [];
    expect(entries.map((e) => [e.event, e.source])).toEqual([
      ['created', 'admission'],
      ['intent_recorded', 'relay'],
      ['publish_acked', 'relay'],
      ['observed', 'poller'],
      ['observed', 'event_stream'],
    ]);
    const evidence = [entries[0], entries[1], entries[2], entries[4], entries[4]];
    expect(await attributes(steps.locator('.step-head time'), 'datetime')).toEqual(evidence.map((e) => e?.at));
    expect(await attributes(steps.locator('.step-source'), 'data-evidence')).toEqual(['history', 'history', 'history', 'history', 'history']);
    const sources = await steps.locator('.step-source').allTextContents();
    expect(sources).toEqual([
      'Evidence: history #1: an HTTP admission (created)',
      'Evidence: history #2: the outbox relay (intent_recorded)',
      'Evidence: history #3: the outbox relay (publish_acked)',
      'Evidence: history #5: salt-api’s event stream (observed)',
      'Evidence: history #5: salt-api’s event stream (observed)',
    ]);
    expect(await page.getByText('time not kept by the record').count()).toBe(0);
    const rows = page.locator('[data-testid="history"] tbody tr');
    expect(await attributes(rows, 'data-seq')).toEqual(['1', '2', '3', '4', '5']);
    expect(await rows.nth(3).textContent()).toContain('poller');
    expect(await attributes(rows.locator('time'), 'datetime')).toEqual(entries.map((e) => e.at));
    const r = seeded.unknown;
    if (r.protocol !== 1) throw new Error('seed: not a protocol record');
    const expected = canonicalJson({ protocol: 1, minion_id: r.minion_id, request_id: r.request_id, jid: r.jid, profile: r.profile, state_digest: '', status: 'unknown', passed: 0, total: 0 });
    expect(await page.getByTestId('receipt').textContent()).toBe(expected);
    await screenshot(page, 'request-timeline');
    await expectAccessible(page);
    expect(problems).toEqual([]);
  });

  it('finds a request by JID or id and a target by minion id, shows a receipt exactly and a custom request by its digest only, and finds nothing of another tenant', async () => {
    const { page, problems } = await signedIn(TOKENS.acmeRead);
    const search = async (q: string): Promise<void> => {
      await page.getByLabel('Find a minion id, request id or JID').fill(q);
      await page.getByRole('button', { name: 'Find' }).click();
    };
    const s = seeded.succeeded;
    if (s.protocol !== 1) throw new Error('seed: not a protocol record');
    await search(s.jid);
    await page.waitForURL(`**/ui/requests/${s.request_id}`);
    await expect
      .poll(() => page.getByTestId('receipt').textContent())
      .toBe(canonicalJson({ protocol: 1, minion_id: s.minion_id, request_id: s.request_id, jid: s.jid, profile: 'configure', state_digest: '', status: 'succeeded', passed: 60, total: 60 }));
    await screenshot(page, 'request-receipt');

    const c = seeded.custom;
    if (c.protocol !== 1) throw new Error('seed: not a protocol record');
    await search(c.request_id);
    await page.waitForURL(`**/ui/requests/${c.request_id}`);
    await page.getByText(c.state_digest, { exact: true }).first().waitFor();
    expect(await page.content()).not.toContain('grow-data');

    await search(seeded.globexUnknown.request_id);
    await page.getByText('No request id of yours matches.').waitFor();
    await search(GLOBEX_A);
    await page.getByText('No minion id of yours matches.').waitFor();

    await search(FLEET.healthy);
    await page.waitForURL(`**/ui/targets/${FLEET.healthy}`);
    await page.getByTestId('target-status').filter({ hasText: 'Not blocked' }).waitFor();
    expect(await page.locator('main tbody tr').count()).toBe(2);
    await screenshot(page, 'target');
    await expectAccessible(page);
    expect(problems).toEqual([]);
  });

  it('works with the keyboard alone: sign in, skip to the content, reach a blocking request and open it', async () => {
    const watched = await openPage(browser, world.service.address);
    opened.push(watched);
    const { page, problems } = watched;
    await page.goto('/ui/');
    await page.getByLabel('Bearer token').focus();
    await page.keyboard.type(TOKENS.acmeRead);
    await page.keyboard.press('Enter');
    await page.getByRole('heading', { name: 'Fleet overview' }).waitFor();
    await page.keyboard.press('Tab');
    expect(await page.evaluate<string | null>('document.activeElement?.textContent ?? null')).toBe('Skip to the content');
    await page.keyboard.press('Enter');
    const target = `request ${idOf(seeded.quarantined)}, blocking ${FLEET.quarantined}`;
    let reached = false;
    for (let i = 0; i < 40 && !reached; i += 1) {
      await page.keyboard.press('Tab');
      reached = (await page.evaluate<string | null>("document.activeElement?.getAttribute('aria-label') ?? null")) === target;
    }
    expect(reached).toBe(true);
    await page.keyboard.press('Enter');
    await page.waitForURL(`**/ui/requests/${idOf(seeded.quarantined)}`);
    await page.getByRole('heading', { name: `Request ${idOf(seeded.quarantined)}` }).waitFor();
    expect(problems).toEqual([]);
  });

  it('refuses a wrong token at sign-in and forgets the token at sign-out', async () => {
    const watched = await openPage(browser, world.service.address);
    opened.push(watched);
    const { page } = watched;
    await page.goto('/ui/');
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('alert').filter({ hasText: 'Paste your token' }).waitFor();
    await page.getByLabel('Bearer token').fill('odf_not-a-token-of-this-service');
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('alert').filter({ hasText: 'does not know this token' }).waitFor();
    await screenshot(page, 'sign-in');
    await expectAccessible(page);
    await page.getByLabel('Bearer token').fill(TOKENS.acmeRead);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('heading', { name: 'Fleet overview' }).waitFor();
    expect(await storedToken(page)).toBe(TOKENS.acmeRead);
    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.getByLabel('Bearer token').waitFor();
    expect(await page.evaluate<number>('sessionStorage.length')).toBe(0);
  });

  it('reconciles only with the reconcile scope and a reason, and every open page sees the target unblocked at once', async () => {
    const id = idOf(seeded.unknown);
    const viewer = await signedIn(TOKENS.acmeRead, `/ui/requests/${id}`);
    await viewer.page.getByTestId('reconcile-needs-scope').waitFor();
    expect(await viewer.page.getByRole('button', { name: 'Reconcile this request' }).count()).toBe(0);
    // Not even the API lets this token do it.
    const token = await storedToken(viewer.page);
    const status = await viewer.page.evaluate<number>(
      `fetch(${JSON.stringify(`/v1/requests/${id}/reconcile`)}, { method: 'POST', headers: { authorization: ${JSON.stringify(`Bearer ${token ?? ''}`)}, 'content-type': 'application/json' }, body: JSON.stringify({ reason: 'trying without the scope' }) }).then((r) => r.status)`,
    );
    expect(status).toBe(403);

    const overview = await signedIn(TOKENS.acmeRead);
    await expect.poll(() => countOf(overview.page, 'unknown').textContent()).toBe('1');
    await mark(overview.page);
    await mark(viewer.page);

    const oncall = await signedIn(TOKENS.acmeReconcile, `/ui/requests/${id}`);
    await oncall.page.getByRole('button', { name: 'Reconcile this request' }).click();
    await oncall.page.getByRole('alert').filter({ hasText: 'Give a reason' }).waitFor();
    expect((await world.store.get(id))?.state).toBe('unknown');
    await screenshot(oncall.page, 'reconcile');
    await expectAccessible(oncall.page);

    await oncall.page.getByLabel('Reason (recorded as acme-oncall)').fill('checked on the host: the state did not run; safe to dispatch again');
    await oncall.page.getByRole('button', { name: 'Reconcile this request' }).click();
    await oncall.page.getByTestId('reconciliation').filter({ hasText: 'acme-oncall' }).waitFor();
    const stored = await world.store.get(id);
    expect(stored?.state).toBe('reconciled');
    expect(stored?.reconciliation).toMatchObject({ actor: 'acme-oncall', reason: 'checked on the host: the state did not run; safe to dispatch again' });

    // The other pages follow without a reload.
    await viewer.page.getByTestId('reconciliation').filter({ hasText: 'acme-oncall' }).waitFor();
    await expect.poll(() => countOf(overview.page, 'unknown').textContent()).toBe('0');
    expect(await countOf(overview.page, 'reconciled').textContent()).toBe('1');
    expect(await overview.page.getByTestId('blocked-count').textContent()).toBe('3 blocked targets');
    expect(await overview.page.locator(`[data-testid="blocked"] tr[data-minion="${FLEET.unknown}"]`).count()).toBe(0);
    expect(await stillMarked(overview.page)).toBe(true);
    expect(await stillMarked(viewer.page)).toBe(true);

    const target = await world.call({ method: 'GET', url: `/v1/targets/${FLEET.unknown}`, token: TOKENS.acmeRead });
    expect(target.json()).toEqual({ minion_id: FLEET.unknown, blocked: false, blockers: [] });
    // The viewer's one console error is the 403 it provoked on purpose above.
    expect(viewer.problems).toEqual(['Failed to load resource: the server responded with a status of 403 (Forbidden)']);
    for (const p of [overview, oncall]) expect(p.problems).toEqual([]);
  });

  it('follows a running rollout batch by batch, with its error budget, without a reload', async () => {
    // Batch 2's minions answer `running` until released: the rollout sits in its second batch meanwhile.
    let hold = true;
    const secondBatch = new Set<string>([ROLLOUT_TARGETS[2], ROLLOUT_TARGETS[3]]);
    world.standIn.returnEvents = false;
    world.standIn.status = (args, minionId, simulated) => {
      if (!hold || !secondBatch.has(minionId) || !('ret' in simulated)) return simulated;
      return { retcode: 0, ret: { ...(simulated.ret as Record<string, unknown>), status: 'running', passed: 0, total: 0 } };
    };
    const ws = join(workspace, 'ws');
    const handle: RolloutHandle = await startRollout(
      { store: world.store, salt: world.salt, callTimeoutMs: 10_000 },
      { profile: 'configure', targets: [...ROLLOUT_TARGETS], batchSize: 2, maxUnresolved: 1 },
      { workspace: ws, pollIntervalMs: 100 },
    );
    try {
      await waitFor(() => {
        const report = readRollout(ws, handle.runId);
        return report.stages[0]?.status === 'succeeded' && report.stages[1]?.status === 'running' && report.targets.length === 4;
      }, 30_000, 'the rollout reaching its second batch');

      const { page, problems } = await signedIn(TOKENS.acmeRead, `/ui/rollouts/${handle.runId}`);
      await page.getByRole('heading', { name: `Rollout ${handle.runId}` }).waitFor();
      await expect.poll(() => page.getByTestId('rollout-progress-text').textContent()).toBe('2 of 4');
      expect(await page.getByTestId('rollout-budget-text').textContent()).toContain('0 of 1');
      expect(await page.locator('[data-stage="batch-00002"] tbody tr').count()).toBe(2);
      expect(await page.locator('[data-stage="batch-00002"]').textContent()).toContain('pending');
      await screenshot(page, 'rollout-running');
      await expectAccessible(page);
      await mark(page);

      hold = false;
      await expect.poll(() => page.getByTestId('rollout-status').textContent(), { timeout: 30_000 }).toContain('succeeded');
      await expect.poll(() => page.getByTestId('rollout-progress-text').textContent()).toBe('4 of 4');
      expect(await page.locator('[data-stage="batch-00002"]').textContent()).not.toContain('pending');
      expect(await stillMarked(page)).toBe(true);
      await screenshot(page, 'rollout-finished');

      await page.getByRole('link', { name: 'Rollouts' }).click();
      await page.getByRole('link', { name: handle.runId }).waitFor();
      await screenshot(page, 'rollouts');
      await expectAccessible(page);
      expect(problems).toEqual([]);
    } finally {
      hold = false;
      await handle.done;
    }
  });
});
