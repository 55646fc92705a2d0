import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startSaltApiStandIn, type SaltApiStandIn } from '../../../../packages/master-runner/tests/support/salt-api-standin.js';
import { assertBuilt, cliEnv } from '../support/cli.js';
import { spawnServe, writeTokensFile, type ServeProcess } from '../serve/support/serve-process.js';
import { ACME_A, TOKENS, testTokensFile, waitFor } from '../serve/support/service-world.js';

/*
 * The dashboard in the shipped executable: `oduflow-master serve` as a real
 * process serves the front end its build carries (dist/ui), and its event
 * stream hears the commits of its own loops — the admission, the relay's
 * publication, the poller's or the event recorder's receipt.
 */

let standIn: SaltApiStandIn | undefined;
let dir: string | undefined;
let serve: ServeProcess | undefined;

beforeAll(() => assertBuilt());
afterEach(async () => {
  if (serve !== undefined && serve.child.exitCode === null && serve.child.signalCode === null) serve.child.kill('SIGKILL');
  await serve?.exited;
  await standIn?.close();
  if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
});

describe('oduflow-master serve', () => {
  it('serves the dashboard it was built with, streams its own commits live, and stops promptly with a stream open', async () => {
    standIn = await startSaltApiStandIn();
    dir = mkdtempSync(join(tmpdir(), 'oduflow-dash-proc-'));
    chmodSync(dir, 0o700);
    serve = spawnServe({ ...cliEnv(dir, standIn), ODUFLOW_TOKENS_FILE: writeTokensFile(dir, testTokensFile()), ODUFLOW_CALL_TIMEOUT_MS: '10000' });
    const address = await serve.address;

    const shell = await fetch(`${address}/ui/`);
    expect(shell.status).toBe(200);
    expect(shell.headers.get('content-security-policy')).toContain("script-src 'self'");
    const html = await shell.text();
    const script = /src="(\/ui\/assets\/[^"]+\.js)"/.exec(html)?.[1];
    expect(script).toBeDefined();
    expect((await fetch(`${address}${script ?? ''}`)).status).toBe(200);

    const controller = new AbortController();
    const events = await fetch(`${address}/v1/events`, { headers: { authorization: `Bearer ${TOKENS.acmeRead}` }, signal: controller.signal });
    expect(events.status).toBe(200);
    let text = '';
    const reading = (async () => {
      const decoder = new TextDecoder();
      try {
        for await (const chunk of events.body as unknown as AsyncIterable<Uint8Array>) text += decoder.decode(chunk, { stream: true });
      } catch {
        // aborted
      }
    })();
    await waitFor(() => text.includes('event: ready'), 10_000, 'the stream open');

    const admitted = await fetch(`${address}/v1/requests`, {
      method: 'POST',
      headers: { authorization: `Bearer ${TOKENS.acmeAll}`, 'idempotency-key': 'dash-1', 'content-type': 'application/json' },
      body: JSON.stringify({ minion_id: ACME_A, profile: 'configure' }),
    });
    expect(admitted.status).toBe(202);
    const { request_id: id } = (await admitted.json()) as { request_id: string };
    const states = (): string[] =>
      text
        .split('\n')
        .filter((line) => line.startsWith('data: ') && line.includes(id))
        .map((line) => (JSON.parse(line.slice(6)) as { page: { record: { state: string } } }).page.record.state);
    await waitFor(() => states().includes('succeeded'), 15_000, 'the receipt heard on the stream');
    // Created by the admission, then the relay's intent and acknowledgement, then the receipt.
    expect(states()[0]).toBe('prepared');
    expect(states()).toEqual(expect.arrayContaining(['publishing', 'published', 'succeeded']));
    expect(text).not.toContain(TOKENS.acmeRead);

    const started = Date.now();
    serve.child.kill('SIGTERM');
    expect(await serve.exited).toEqual({ code: 0, signal: null });
    expect(Date.now() - started).toBeLessThan(10_000);
    controller.abort();
    await reading;
  });
});
