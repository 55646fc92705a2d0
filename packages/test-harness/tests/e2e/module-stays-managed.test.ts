/*
 * End-to-end (issue 8 §4): the module stays managed after the first boot.
 * A real minion, bootstrapped by the cloud-init fragment, runs the
 * fragment's client_receipts schedule entry with a test-only interval (5 s +
 * 1..2 s splay, through the topology's minionOptions). Nothing else applies
 * client_receipts after start-up: a changed or deleted installed module is
 * put back by the minion's own scheduler, and a tampered module served by the
 * master is fetched by a scheduled run and never installed.
 *
 * A scheduled run is followed through the minion's log: the daemon logs
 * "Running scheduled job: <name> [(runtime missed by <s> seconds)] with jid
 * <jid>" when it starts one (INFO),
 * and the job process logs "schedule.handle_func: Removing <proc>/<jid>" in
 * its `finally` once the function returned (DEBUG; salt/utils/schedule.py
 * 3006.27, lines 1793 and 963). The minion logs at debug for that.
 */
import { readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  CLIENT_RECEIPTS_SCHEDULE_NAME,
  FILE_TREE_MODULE_PATH,
  clientReceiptsScheduleEntry,
  installedModulePath,
  moduleBytes,
  moduleSha256,
  verifyInstalledModule,
} from '@oduflow/minion-wrapper';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTopology, type Topology } from '../../src/topology.js';
import { scenarioTimer, waitUntil } from './support/e2e.js';

const INTERVAL_SECONDS = 5;
const SPLAY_SECONDS = 2;
/** Several schedule periods, with room for a loaded 2-core machine. */
const RESTORE_DEADLINE_MS = 90_000;

describe('the minion keeps the reviewed module installed on its own schedule', () => {
  let topo: Topology;
  let id: string;
  let installed: string;
  let served: string;
  let staged: string;

  const minionLog = () => readFileSync(topo.logFile(id), 'utf8');
  const scheduledJidsAfter = (offset: number): string[] =>
    [...minionLog().slice(offset).matchAll(new RegExp(`Running scheduled job: ${CLIENT_RECEIPTS_SCHEDULE_NAME}(?: \\(runtime missed by [^)]*\\))? with jid (\\d{20})`, 'g'))].map(
      (match) => match[1] as string,
    );
  const finished = (jid: string) => minionLog().includes(`schedule.handle_func: Removing ${join(topo.cacheDir(id), 'proc', jid)}`);

  /** The first scheduled client_receipts run that starts after the log offset, once it has returned. */
  const nextScheduledRun = async (offset: number): Promise<string> => {
    const jid = await waitUntil(`a scheduled ${CLIENT_RECEIPTS_SCHEDULE_NAME} run to start`, RESTORE_DEADLINE_MS, () =>
      scheduledJidsAfter(offset)[0],
    );
    await waitUntil(`scheduled run ${jid} to return`, RESTORE_DEADLINE_MS, () => (finished(jid) ? true : undefined));
    return jid;
  };

  beforeAll(async () => {
    const t = scenarioTimer('topology with a 5 s client_receipts schedule starts');
    topo = await startTopology({
      startTimeoutMs: 120_000,
      minionOptions: {
        log_level_logfile: 'debug',
        schedule: { [CLIENT_RECEIPTS_SCHEDULE_NAME]: clientReceiptsScheduleEntry(INTERVAL_SECONDS, SPLAY_SECONDS) },
      },
    });
    id = topo.minionIds[0] as string;
    installed = installedModulePath(topo.extmodsDir(id));
    served = join(topo.fileRoot, FILE_TREE_MODULE_PATH);
    staged = join(topo.cacheDir(id), 'oduflow', 'oduflow_job.py.staged');
    t('ready');
  }, 180_000);

  afterAll(async () => {
    // eslint-disable-next-line @typescript-eslint/no-unnecessary-condition -- unset when beforeAll failed
    await topo?.stop();
    // eslint-disable-next-line @typescript-eslint/no-unnecessary-condition -- unset when beforeAll failed
    expect(topo?.leftoverProcesses() ?? []).toEqual([]);
  }, 60_000);

  it('runs the fragment schedule entry with the test interval, outside the job cache and the master', async () => {
    const [listed] = await topo.saltApi({ client: 'local', tgt: [id], tgt_type: 'list', fun: 'schedule.list', kwarg: { return_yaml: false }, timeout: 20 });
    expect((listed as Record<string, Record<string, unknown>>)[id]?.[CLIENT_RECEIPTS_SCHEDULE_NAME]).toMatchObject({
      function: 'state.apply',
      args: ['client_receipts'],
      seconds: INTERVAL_SECONDS,
      splay: SPLAY_SECONDS,
      jid_include: false,
      return_job: false,
    });
    // jid_include: false, so a run writes no <cachedir>/proc/<jid> file: Salt's state conflict check
    // (state.running, which a managed apply's state.sls runs) lists running state jobs from those files.
    // With jid_include the scheduler logs, for every run it starts (salt/utils/schedule.py 3006.27 line 1762):
    // "schedule: Job <name> was scheduled with jid_include, adding to cache".
    const offset = minionLog().length;
    await nextScheduledRun(offset);
    expect(minionLog().slice(offset)).not.toContain(`schedule: Job ${CLIENT_RECEIPTS_SCHEDULE_NAME} was scheduled with jid_include`);
  }, 120_000);

  it('puts back a changed installed module, then a deleted one, with no apply from the master', async () => {
    const done = scenarioTimer('schedule repairs a changed and a deleted module');
    expect(verifyInstalledModule(topo.extmodsDir(id))).toMatchObject({ ok: true });

    const offset = minionLog().length;
    writeFileSync(installed, Buffer.concat([moduleBytes(), Buffer.from('\n# changed on the minion\n')]));
    expect(verifyInstalledModule(topo.extmodsDir(id))).toMatchObject({ ok: false, status: 'digest_mismatch' });
    await waitUntil('the scheduler to put the reviewed module back', RESTORE_DEADLINE_MS, () =>
      verifyInstalledModule(topo.extmodsDir(id)).ok ? true : undefined,
    );
    expect(readFileSync(installed).equals(moduleBytes())).toBe(true);
    expect(scheduledJidsAfter(offset).length).toBeGreaterThan(0);

    rmSync(installed);
    await waitUntil('the scheduler to install the deleted module again', RESTORE_DEADLINE_MS, () =>
      verifyInstalledModule(topo.extmodsDir(id)).ok ? true : undefined,
    );
    expect(verifyInstalledModule(topo.extmodsDir(id))).toMatchObject({ ok: true, mode: '0644', actualSha256: moduleSha256() });

    // the repair signalled the daemon: a new job loads the module again
    const [answer] = await topo.saltApi({ client: 'local', tgt: [id], tgt_type: 'list', fun: 'oduflow_job.capabilities', timeout: 20 });
    expect((answer as Record<string, unknown>)[id]).toMatchObject({ protocol: 1, salt_version: '3006.27' });
    done('changed and deleted module put back by the schedule, capabilities answer');
  }, 240_000);

  it('never installs a tampered module the master serves: a scheduled run fetches it, fails its digest check and changes nothing', async () => {
    const done = scenarioTimer('schedule refuses a tampered served module');
    const reviewed = readFileSync(served);
    expect(reviewed.equals(moduleBytes())).toBe(true);
    const before = statSync(installed);
    const tampered = Buffer.concat([reviewed, Buffer.from('\n# not the reviewed module\n')]);
    const offset = minionLog().length;
    writeFileSync(served, tampered);
    try {
      // The first run that starts after the tamper fetches the served bytes into its staging copy.
      const jid = await nextScheduledRun(offset);
      expect(readFileSync(staged).equals(tampered), `run ${jid} staged the served bytes`).toBe(true);
      // ... and left the installed module alone: same bytes, same file (never replaced), reviewed digest.
      const after = statSync(installed);
      expect([after.ino, after.ctimeMs, after.mtimeMs]).toEqual([before.ino, before.ctimeMs, before.mtimeMs]);
      expect(readFileSync(installed).equals(reviewed)).toBe(true);
      expect(verifyInstalledModule(topo.extmodsDir(id))).toMatchObject({ ok: true, actualSha256: moduleSha256() });

      // A later run, with the module also changed on the minion, still installs nothing from the master.
      writeFileSync(installed, Buffer.concat([reviewed, Buffer.from('\n# changed on the minion\n')]));
      const changed = readFileSync(installed);
      await nextScheduledRun(minionLog().length);
      expect(readFileSync(installed).equals(changed)).toBe(true);
    } finally {
      writeFileSync(served, reviewed);
    }
    // With the reviewed bytes served again, the next runs repair the minion.
    await waitUntil('the scheduler to repair the module once the master serves the reviewed bytes', RESTORE_DEADLINE_MS, () =>
      verifyInstalledModule(topo.extmodsDir(id)).ok ? true : undefined,
    );
    done('tampered served module fetched, refused, installed module untouched; repaired once served again');
  }, 300_000);
});
