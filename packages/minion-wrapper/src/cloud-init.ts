import { isIP } from 'node:net';
import { posix } from 'node:path';
import { MinionWrapperError } from './errors.js';
import { assertCanonicalMinionId } from './minion-id.js';
import { MODULE_FILE_NAME, moduleBytes, parseModuleVersion, sha256Hex } from './module-asset.js';

/** Salt's default extension-module directory on a Linux minion. */
export const DEFAULT_EXTMODS_DIR = '/var/cache/salt/minion/extmods';
/** Where the fragment writes the minion's oduflow configuration (a `minion.d` include). */
export const DEFAULT_MINION_CONFIG_PATH = '/etc/salt/minion.d/oduflow.conf';
/**
 * Mode of the installed module. Salt loads it as root; integrity only needs
 * that nobody but root can write it. The file is a public, reviewed asset with
 * no secrets, so read bits for others cost nothing, and 0644 is what Salt's
 * own `saltutil.sync_modules` writes, so a sync and `client_receipts` never
 * fight over the mode.
 */
export const MODULE_FILE_MODE = '0644';
export const MINION_CONFIG_FILE_MODE = '0644';

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
  /** write_files, in order: the module, then the minion config. */
  files: CloudInitFile[];
  /** `sha256sum --check` input line: `<hex>  <modulePath>`. */
  sha256sumLine: string;
  /** The single runcmd script: verify the digest, then enable and start salt-minion. */
  runcmdScript: string;
}

const SAFE_PATH = /^\/[A-Za-z0-9._/-]*$/;
/** One RFC 1123 label: letters, digits, '-', not starting or ending with '-', 1-63 characters. */
const LABEL = /^[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?$/;
const PORT = /^[1-9][0-9]{0,4}$/;

function assertSafeAbsolutePath(value: string, what: string): string {
  const trimmed = typeof value === 'string' ? value.replace(/(?<=.)\/+$/, '') : '';
  const segments = trimmed.split('/').slice(1);
  if (
    !SAFE_PATH.test(trimmed) ||
    trimmed.length > 1024 ||
    trimmed === '/' ||
    segments.some((segment) => segment === '' || segment === '.' || segment === '..')
  ) {
    throw new MinionWrapperError(
      'invalid_path',
      `${what} must be a normalized absolute path of letters, digits, '.', '_', '-' and '/'`,
    );
  }
  return trimmed;
}

/** An RFC 1123 host name (optional trailing dot) whose last label is not all digits. */
function isHostName(value: string): boolean {
  const name = value.endsWith('.') ? value.slice(0, -1) : value;
  if (name.length < 1 || name.length > 253) return false;
  const labels = name.split('.');
  if (!labels.every((label) => LABEL.test(label))) return false;
  // an all-numeric name that is not an IP address (e.g. 10.0.0.999, 12345) is refused
  return !/^[0-9]+$/.test(labels[labels.length - 1] ?? '');
}

const isPort = (value: string): boolean => PORT.test(value) && Number(value) <= 65535;

/**
 * Salt's `master` forms: an IP address (net.isIP), an RFC 1123 host name, or
 * either with a port: `host:port`, `1.2.3.4:port`, `[v6]:port`.
 */
function isMasterHost(value: string): boolean {
  if (isIP(value) !== 0) return true;
  if (isHostName(value)) return true;
  const bracketed = /^\[([^\]]+)\]:([^:]*)$/.exec(value);
  if (bracketed) return isIP(bracketed[1] ?? '') === 6 && isPort(bracketed[2] ?? '');
  const colon = value.lastIndexOf(':');
  if (colon <= 0 || value.indexOf(':') !== colon) return false;
  const host = value.slice(0, colon);
  return (isIP(host) === 4 || isHostName(host)) && isPort(value.slice(colon + 1));
}

function assertMasterHost(value: string): string {
  if (typeof value !== 'string' || !isMasterHost(value)) {
    throw new MinionWrapperError('invalid_master_host', 'master must be a host name or an IP address, optionally with a port');
  }
  return value;
}

function shellQuote(value: string): string {
  return `'${value.replaceAll("'", `'\\''`)}'`;
}

export function planCloudInit(options: CloudInitOptions): CloudInitPlan {
  const minionId = assertCanonicalMinionId(options.minionId);
  const masterHost = assertMasterHost(options.masterHost);
  const extmodsDir = assertSafeAbsolutePath(options.extmodsDir ?? DEFAULT_EXTMODS_DIR, 'extmods directory');
  const configPath = assertSafeAbsolutePath(options.minionConfigPath ?? DEFAULT_MINION_CONFIG_PATH, 'minion config path');
  const module = Buffer.from(options.module ?? moduleBytes());
  const digest = sha256Hex(module);
  const version = parseModuleVersion(module);
  const modulePath = posix.join(extmodsDir, 'modules', MODULE_FILE_NAME);

  const config = [
    '# Written at first boot by the oduflow cloud-init fragment.',
    `id: ${JSON.stringify(minionId)}`,
    `master: ${JSON.stringify(masterHost)}`,
    // oduflow_job refuses to run its raw-result shims outside a per-job process.
    'multiprocessing: true',
    `extension_modules: ${JSON.stringify(extmodsDir)}`,
    // Only client_receipts, after its digest check, may install oduflow_job:
    // no saltutil.sync_all before each highstate (it copies the master's
    // _modules/ into extmods unchecked), and no sync may delete the module
    // because the master does not serve it under _modules/.
    'autoload_dynamic_modules: false',
    'clean_dynamic_modules: false',
    '',
  ].join('\n');

  const sha256sumLine = `${digest}  ${modulePath}`;
  const runcmdScript = [
    `if ! printf '%s\\n' ${shellQuote(sha256sumLine)} | sha256sum --check --strict --status -; then`,
    `  echo ${shellQuote(`oduflow: ${modulePath} does not match the reviewed SHA-256; salt-minion not started`)} >&2`,
    '  exit 1',
    'fi',
    'systemctl enable salt-minion',
    'systemctl restart salt-minion',
  ].join('\n');

  return {
    minionId,
    masterHost,
    extmodsDir,
    modulePath,
    moduleSha256: digest,
    moduleVersion: version,
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
    runcmdScript,
  };
}

/** A YAML double-quoted scalar; JSON string syntax is a subset of it. */
const q = (value: string): string => JSON.stringify(value);

/**
 * The `#cloud-config` fragment that installs the reviewed module into the
 * minion's extension-module directory and starts salt-minion only after the
 * installed file matches the module's SHA-256. The image must not start
 * salt-minion on its own before cloud-init's final stage.
 */
export function renderCloudInit(options: CloudInitOptions): string {
  const plan = planCloudInit(options);
  const lines = [
    '#cloud-config',
    `# oduflow minion bootstrap for ${plan.minionId}: oduflow_job ${plan.moduleVersion}, sha256 ${plan.moduleSha256}.`,
    '# write_files installs the module before salt-minion starts; runcmd checks its digest first.',
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
  lines.push('runcmd:', `  - [${q('sh')}, ${q('-ec')}, ${q(plan.runcmdScript)}]`, '');
  return lines.join('\n');
}
