import { spawnSync } from 'node:child_process';
import { createHash, generateKeyPairSync, randomBytes } from 'node:crypto';
import { chmodSync, mkdirSync, writeFileSync } from 'node:fs';
import { dirname, isAbsolute, join, normalize, sep } from 'node:path';
import { planCloudInit, verifyInstalledModule } from '@oduflow/minion-wrapper';
import type { MasterPaths, MinionPaths } from './topology-paths.js';

/*
 * Everything a topology writes before a daemon starts: credentials, the
 * master and minion configs, the module installed the production way, key
 * pairs and the master's file tree.
 */

export interface TopologyPorts {
  publish: number;
  ret: number;
  api: number;
}

const SAFE_RELATIVE = /^[A-Za-z0-9._/-]+$/;

function writePrivate(path: string, content: string | Buffer, mode = 0o600): void {
  mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
  writeFileSync(path, content, { mode });
  chmodSync(path, mode);
}

/** JSON is YAML: Salt reads these configs as YAML. */
const yaml = (value: unknown) => `${JSON.stringify(value, null, 2)}\n`;

export interface ApiCredentials {
  username: string;
  password: string;
}

/** A random salt-api password (file 0600) and the eauth `file` users list holding its SHA-256. */
export function writeApiCredentials(master: MasterPaths): ApiCredentials {
  const username = 'oduflow';
  const password = randomBytes(24).toString('hex');
  writePrivate(master.passwordFile, password);
  writePrivate(master.eauthFile, `${username}:${createHash('sha256').update(password).digest('hex')}\n`);
  return { username, password };
}

export function writeMasterConfig(
  master: MasterPaths,
  settings: { ports: TopologyPorts; user: string; logLevel: string; username: string },
): void {
  const { ports, user, logLevel, username } = settings;
  writePrivate(
    join(master.configDir, 'master'),
    yaml({
      root_dir: master.root,
      interface: '127.0.0.1',
      publish_port: ports.publish,
      ret_port: ports.ret,
      user,
      auto_accept: true,
      worker_threads: 3,
      file_roots: { base: [master.fileRoot] },
      pillar_roots: { base: [master.pillarRoot] },
      fileserver_backend: ['roots'],
      log_file: master.logFile('master'),
      key_logfile: master.logFile('key'),
      api_logfile: master.logFile('api'),
      api_pidfile: master.apiPidfile,
      log_level_logfile: logLevel,
      netapi_enable_clients: ['local', 'local_async'],
      external_auth: {
        file: { '^filename': master.eauthFile, '^filetype': 'text', '^hashtype': 'sha256', [username]: ['.*'] },
      },
      rest_cherrypy: { host: '127.0.0.1', port: ports.api, disable_ssl: true },
      enable_fqdns_grains: false,
      enable_gpu_grains: false,
    }),
    0o600,
  );
}

/** The include a test's `minionOptions` become: read after the cloud-init include (`oduflow.conf`), so it wins. */
const MINION_OPTIONS_INCLUDE = 'zz-topology.conf';

/**
 * The topology's part of the minion config (`<configDir>/minion`): its root,
 * ports, receipt store, test-role paths and fast reconnects. The cloud-init
 * include and the test's options (`minion.d/`) are read after it.
 */
export function writeMinionConfig(
  minion: MinionPaths,
  settings: { ports: TopologyPorts; user: string; logLevel: string },
  extra: Record<string, unknown> | undefined,
): void {
  mkdirSync(minion.workDir, { recursive: true, mode: 0o700 });
  chmodSync(minion.root, 0o700);
  writePrivate(
    join(minion.configDir, 'minion'),
    yaml({
      root_dir: minion.root,
      master_port: settings.ports.ret,
      publish_port: settings.ports.publish,
      user: settings.user,
      log_file: minion.logFile,
      log_level_logfile: settings.logLevel,
      oduflow_receipt_dir: minion.receiptDir,
      oduflow_test_marker: minion.markerFile,
      oduflow_test_workdir: minion.workDir,
      // fast lost-return tests and fast reconnects
      return_retry_timer: 1,
      return_retry_timer_max: 2,
      return_retry_tries: 1,
      acceptance_wait_time: 1,
      acceptance_wait_time_max: 2,
      random_reauth_delay: 0,
      recon_default: 100,
      recon_max: 1000,
      recon_randomize: false,
      auth_timeout: 5,
      enable_fqdns_grains: false,
      enable_gpu_grains: false,
      mine_enabled: false,
      grains_refresh_every: 0,
    }),
    0o600,
  );
  if (extra !== undefined) writePrivate(join(minion.configDir, 'minion.d', MINION_OPTIONS_INCLUDE), yaml(extra), 0o600);
}

/**
 * The cloud-init fragment applied chroot-style under the minion's root:
 * write_files (the module, unless `install` is false, and the minion.d
 * include with its options and schedule), then runcmd's sha256sum check.
 * Returns the installed module's SHA-256, or null when nothing was installed.
 */
export function installMinionBundle(minion: MinionPaths, id: string, module: Buffer, install: boolean): string | null {
  const plan = planCloudInit({ minionId: id, masterHost: '127.0.0.1', module });
  for (const file of plan.files) {
    if (!install && file.path === plan.modulePath) continue;
    const target = join(minion.root, file.path);
    mkdirSync(dirname(target), { recursive: true, mode: 0o755 });
    writeFileSync(target, file.content, { mode: Number.parseInt(file.permissions, 8) });
    chmodSync(target, Number.parseInt(file.permissions, 8));
  }
  if (!install) return null;
  const check = spawnSync('sha256sum', ['--check', '--strict', '--status', '-'], {
    input: `${plan.moduleSha256}  ${join(minion.root, plan.modulePath)}\n`,
  });
  const verified = verifyInstalledModule(join(minion.root, plan.extmodsDir), { expectedSha256: plan.moduleSha256 });
  if (check.status !== 0 || !verified.ok) {
    throw new Error(`topology: installed module failed verification (${verified.status})`);
  }
  return plan.moduleSha256;
}

/**
 * Pre-seeded RSA key pair (what Salt would generate on first start, in
 * Python, ~3 s each on 2 cores): PKCS#1 private key 0400, SPKI public key.
 */
export function seedKeys(pkiDir: string, name: string): void {
  const { privateKey, publicKey } = generateKeyPairSync('rsa', {
    modulusLength: 2048,
    publicKeyEncoding: { type: 'spki', format: 'pem' },
    privateKeyEncoding: { type: 'pkcs1', format: 'pem' },
  });
  mkdirSync(pkiDir, { recursive: true, mode: 0o700 });
  writePrivate(join(pkiDir, `${name}.pem`), privateKey, 0o400);
  writePrivate(join(pkiDir, `${name}.pub`), publicKey, 0o644);
}

function assertRelative(path: string): string {
  const normal = normalize(path);
  if (!SAFE_RELATIVE.test(path) || isAbsolute(path) || normal !== path || normal.split(sep).includes('..')) {
    throw new Error(`topology: file_roots path must be a plain relative path (got ${JSON.stringify(path)})`);
  }
  return path;
}

/** Replaces (or adds) a file in the master's file_roots. */
export function writeRole(fileRoot: string, relativePath: string, content: string): void {
  const path = join(fileRoot, assertRelative(relativePath));
  mkdirSync(dirname(path), { recursive: true, mode: 0o755 });
  writeFileSync(path, content, { mode: 0o644 });
}
