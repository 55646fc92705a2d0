/*
 * The minion options the cloud-init fragment writes (a `minion.d` include,
 * read after /etc/salt/minion, so its values win over the image's main file).
 */

/**
 * Options `oduflow_job.capabilities` requires before it reports `ready`
 * (docs/wire-contract.md, "Module 1.1.0 additions"): a job process per
 * publication (the raw-result shims work only there), and neither the minion
 * job cache nor either pillar cache nor the gpg renderer's cache, which would
 * keep raw state returns, rendered pillar or decrypted secrets on disk.
 */
export const READINESS_MINION_OPTIONS = Object.freeze({
  multiprocessing: true,
  cache_jobs: false,
  minion_pillar_cache: false,
  pillar_cache: false,
  gpg_cache: false,
});

/**
 * Options the fragment never sets: each moves a call off the minion's own
 * direct-call executor (`sudo_user` re-runs it through salt-call under
 * another JID), and `capabilities` reports such a minion not ready.
 */
export const UNSET_MINION_OPTIONS = Object.freeze(['sudo_user', 'module_executors'] as const);

/** Name of the minion `schedule` entry that applies client_receipts. */
export const CLIENT_RECEIPTS_SCHEDULE_NAME = 'oduflow_client_receipts';
/** Default seconds between scheduled client_receipts applies: one hour. */
export const DEFAULT_CLIENT_RECEIPTS_INTERVAL_SECONDS = 3600;
/** Default upper bound of the random delay Salt adds to each scheduled run (1..600 s). */
export const DEFAULT_CLIENT_RECEIPTS_SPLAY_SECONDS = 600;

export interface MinionConfigValues {
  minionId: string;
  masterHost: string;
  extmodsDir: string;
  intervalSeconds: number;
  splaySeconds: number;
}

/** The schedule entry as Salt reads it (`schedule: {<name>: <this>}`). */
export function clientReceiptsScheduleEntry(intervalSeconds: number, splaySeconds: number) {
  return {
    function: 'state.apply',
    args: ['client_receipts'],
    seconds: intervalSeconds,
    splay: splaySeconds,
    run_on_start: false,
    // No proc file: Salt's state conflict check (state.running, which
    // oduflow_job's state.sls call runs) would otherwise see this job and
    // answer a managed apply published meanwhile with a conflict, which
    // reduces to `unknown` and blocks the target until an operator acts.
    // client_receipts touches only the module and its staging copy.
    jid_include: false,
    // The state output stays on the minion (its log): nothing of it goes to
    // the master's job cache. Drift shows in capabilities' module digest.
    return_job: false,
  };
}

/**
 * The include's YAML text. Every interpolated value is validated by the
 * caller and written as a JSON string (a YAML double-quoted scalar) or an
 * integer.
 */
export function renderMinionConfig(values: MinionConfigValues): string {
  const q = (value: string) => JSON.stringify(value);
  const entry = clientReceiptsScheduleEntry(values.intervalSeconds, values.splaySeconds);
  return [
    '# Written at first boot by the oduflow cloud-init fragment.',
    `id: ${q(values.minionId)}`,
    `master: ${q(values.masterHost)}`,
    '# oduflow_job readiness: a job process per publication (its raw-result shims',
    '# need one), no minion job cache and no pillar cache (they would keep raw',
    '# state returns and rendered pillar on disk). sudo_user and module_executors',
    '# stay unset: both take a call off the direct-call executor.',
    ...Object.entries(READINESS_MINION_OPTIONS).map(([key, value]) => `${key}: ${String(value)}`),
    `extension_modules: ${q(values.extmodsDir)}`,
    '# Only client_receipts, after its digest check, may install oduflow_job:',
    '# no saltutil.sync_all before each highstate (it copies the master\'s',
    '# _modules/ into extmods unchecked), and no sync may delete the module',
    '# because the master does not serve it under _modules/.',
    'autoload_dynamic_modules: false',
    'clean_dynamic_modules: false',
    '# client_receipts again every interval (plus a random splay), so a changed',
    '# or deleted module is put back. jid_include: false keeps the run out of',
    '# the state conflict check of a managed apply; return_job: false keeps its',
    '# output on the minion.',
    'schedule:',
    `  ${CLIENT_RECEIPTS_SCHEDULE_NAME}:`,
    `    function: ${entry.function}`,
    '    args:',
    ...entry.args.map((arg) => `      - ${arg}`),
    `    seconds: ${entry.seconds}`,
    `    splay: ${entry.splay}`,
    `    run_on_start: ${String(entry.run_on_start)}`,
    `    jid_include: ${String(entry.jid_include)}`,
    `    return_job: ${String(entry.return_job)}`,
    '',
  ].join('\n');
}
