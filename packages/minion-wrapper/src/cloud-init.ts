import { assertMasterHost, assertSafeAbsolutePath, assertSchedule } from './cloud-init-inputs.js';
import { assertCanonicalMinionId } from './minion-id.js';
import {
  CLIENT_RECEIPTS_SCHEDULE_NAME,
  DEFAULT_CLIENT_RECEIPTS_INTERVAL_SECONDS,
  DEFAULT_CLIENT_RECEIPTS_SPLAY_SECONDS,
  renderMinionConfig,
} from './minion-config.js';
import { moduleBytes, parseModuleVersion, sha256Hex } from './module-asset.js';
import { DEFAULT_EXTMODS_DIR, DEFAULT_MINION_CONFIG_PATH, installedModulePath } from './paths.js';

/**
 * Mode of the installed module. Salt loads it as root; integrity only needs
 * that nobody but root can write it. The file is a public, reviewed asset with
 * no secrets, so read bits for others cost nothing, and 0644 is what Salt's
 * own `saltutil.sync_modules` writes, so a sync and `client_receipts` never
 * fight over the mode.
 */
export const MODULE_FILE_MODE = '0644';
export const MINION_CONFIG_FILE_MODE = '0644';
/** cloud-init-per semaphore name of the bootcmd that holds salt-minion (once per instance). */
export const HOLD_SALT_MINION_SEMAPHORE = 'oduflow-hold-salt-minion';

export interface CloudInitOptions {
  /** `client-<uuid>`; validated with the canonical rule. */
  minionId: string;
  /** The Salt master's host name or IP address. */
  masterHost: string;
  /** Absolute extension-module directory of the minion (default {@link DEFAULT_EXTMODS_DIR}). */
  extmodsDir?: string;
  /** Absolute path of the minion config include (default {@link DEFAULT_MINION_CONFIG_PATH}). */
  minionConfigPath?: string;
  /**
   * Seconds between the scheduled client_receipts applies that keep the
   * module managed (default {@link DEFAULT_CLIENT_RECEIPTS_INTERVAL_SECONDS},
   * 60 to 604800).
   */
  clientReceiptsIntervalSeconds?: number;
  /** Salt adds 1..splay random seconds to each run (default {@link DEFAULT_CLIENT_RECEIPTS_SPLAY_SECONDS}, 1 to the interval). */
  clientReceiptsSplaySeconds?: number;
  /**
   * The module bytes to install. Defaults to the reviewed module shipped in
   * this package; tests use it to install an older or foreign module.
   */
  module?: Uint8Array;
}

export interface CloudInitFile {
  path: string;
  owner: 'root:root';
  permissions: string;
  content: Buffer;
  /** How the fragment carries `content`: `b64` for the module, plain text for the config. */
  encoding: 'b64' | 'text';
}

/** Everything the fragment does, as data: `renderCloudInit` serializes exactly this. */
export interface CloudInitPlan {
  minionId: string;
  masterHost: string;
  extmodsDir: string;
  /** `<extmods>/modules/oduflow_job.py` */
  modulePath: string;
  moduleSha256: string;
  moduleVersion: string;
  /** The minion `schedule` entry that applies client_receipts periodically. */
  schedule: { name: string; intervalSeconds: number; splaySeconds: number };
  /**
   * The bootcmd script, run once per instance through `cloud-init-per`
   * before write_files: masks salt-minion (nothing can start it any more),
   * then stops it in case the image already started it.
   */
  bootcmdScript: string;
  /** write_files, in order: the module, then the minion config. */
  files: CloudInitFile[];
  /** `sha256sum --check` input line: `<hex>  <modulePath>`. */
  sha256sumLine: string;
  /** The single runcmd script: verify the digest, then unmask, enable and (re)start salt-minion. */
  runcmdScript: string;
}

function shellQuote(value: string): string {
  return `'${value.replaceAll("'", `'\\''`)}'`;
}

/** Mask first, so nothing (a boot target, a restart policy) can start it again between the two. */
const BOOTCMD_SCRIPT = ['systemctl mask salt-minion', 'systemctl stop salt-minion'].join('\n');

function runcmdScript(sha256sumLine: string, modulePath: string): string {
  return [
    `if ! printf '%s\\n' ${shellQuote(sha256sumLine)} | sha256sum --check --strict --status -; then`,
    `  echo ${shellQuote(`oduflow: ${modulePath} does not match the reviewed SHA-256; salt-minion stays masked`)} >&2`,
    '  exit 1',
    'fi',
    'systemctl unmask salt-minion',
    'systemctl enable salt-minion',
    // restart: starts a stopped unit, and reloads one something started anyway
    'systemctl restart salt-minion',
  ].join('\n');
}

export function planCloudInit(options: CloudInitOptions): CloudInitPlan {
  const minionId = assertCanonicalMinionId(options.minionId);
  const masterHost = assertMasterHost(options.masterHost);
  const extmodsDir = assertSafeAbsolutePath(options.extmodsDir ?? DEFAULT_EXTMODS_DIR, 'extmods directory');
  const configPath = assertSafeAbsolutePath(options.minionConfigPath ?? DEFAULT_MINION_CONFIG_PATH, 'minion config path');
  const intervalSeconds = options.clientReceiptsIntervalSeconds ?? DEFAULT_CLIENT_RECEIPTS_INTERVAL_SECONDS;
  const splaySeconds = options.clientReceiptsSplaySeconds ?? DEFAULT_CLIENT_RECEIPTS_SPLAY_SECONDS;
  assertSchedule(intervalSeconds, splaySeconds);
  const module = Buffer.from(options.module ?? moduleBytes());
  const digest = sha256Hex(module);
  const modulePath = installedModulePath(extmodsDir);
  const config = renderMinionConfig({ minionId, masterHost, extmodsDir, intervalSeconds, splaySeconds });
  const sha256sumLine = `${digest}  ${modulePath}`;

  return {
    minionId,
    masterHost,
    extmodsDir,
    modulePath,
    moduleSha256: digest,
    moduleVersion: parseModuleVersion(module),
    schedule: { name: CLIENT_RECEIPTS_SCHEDULE_NAME, intervalSeconds, splaySeconds },
    bootcmdScript: BOOTCMD_SCRIPT,
    files: [
      { path: modulePath, owner: 'root:root', permissions: MODULE_FILE_MODE, content: module, encoding: 'b64' },
      {
        path: configPath,
        owner: 'root:root',
        permissions: MINION_CONFIG_FILE_MODE,
        content: Buffer.from(config, 'utf8'),
        encoding: 'text',
      },
    ],
    sha256sumLine,
    runcmdScript: runcmdScript(sha256sumLine, modulePath),
  };
}

/** A YAML double-quoted scalar; JSON string syntax is a subset of it. */
const q = (value: string): string => JSON.stringify(value);
/** A YAML flow sequence of double-quoted scalars: one command's argv. */
const argv = (...args: string[]): string => `[${args.map(q).join(', ')}]`;

/**
 * The `#cloud-config` fragment: bootcmd (init stage, before write_files)
 * masks and stops salt-minion once per instance, for images that ship it
 * enabled; write_files installs the module and the minion config; runcmd
 * (final stage) checks the installed module's SHA-256 and only then unmasks,
 * enables and starts salt-minion. On a mismatch salt-minion stays masked.
 */
export function renderCloudInit(options: CloudInitOptions): string {
  const plan = planCloudInit(options);
  const lines = [
    '#cloud-config',
    `# oduflow minion bootstrap for ${plan.minionId}: oduflow_job ${plan.moduleVersion}, sha256 ${plan.moduleSha256}.`,
    '# bootcmd holds salt-minion (masked, stopped) until runcmd has checked the installed module;',
    `# the minion then applies client_receipts every ${plan.schedule.intervalSeconds} s (+ up to ${plan.schedule.splaySeconds} s splay).`,
    'bootcmd:',
    `  - ${argv('cloud-init-per', 'instance', HOLD_SALT_MINION_SEMAPHORE, 'sh', '-ec', plan.bootcmdScript)}`,
    'write_files:',
  ];
  for (const file of plan.files) {
    lines.push(`  - path: ${q(file.path)}`, `    owner: ${q(file.owner)}`, `    permissions: ${q(file.permissions)}`);
    if (file.encoding === 'b64') {
      lines.push('    encoding: b64', `    content: ${q(file.content.toString('base64'))}`);
    } else {
      lines.push(`    content: ${q(file.content.toString('utf8'))}`);
    }
  }
  lines.push('runcmd:', `  - ${argv('sh', '-ec', plan.runcmdScript)}`, '');
  return lines.join('\n');
}
