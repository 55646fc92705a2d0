#!/usr/bin/env node
/**
 * oduflow-topology: starts a local Salt topology (master, salt-api, minions)
 * in a private temp dir, prints its connection info as one JSON line on
 * stdout, stays in the foreground, and tears everything down on SIGINT or
 * SIGTERM.
 *
 *   oduflow-topology start [--minions N] [--dir D] [--keep] [--log-level L]
 */
import { parseArgs } from 'node:util';
import { startTopology, type TopologyOptions } from './topology.js';

const USAGE = 'usage: oduflow-topology start [--minions N] [--dir D] [--keep] [--log-level L] [--no-module]\n';

async function main(argv: string[]): Promise<number> {
  const { positionals, values } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      minions: { type: 'string' },
      dir: { type: 'string' },
      keep: { type: 'boolean' },
      'log-level': { type: 'string' },
      'no-module': { type: 'boolean' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  if (values.help) {
    process.stdout.write(USAGE);
    return 0;
  }
  if (positionals.length !== 1 || positionals[0] !== 'start') {
    process.stderr.write(USAGE);
    return 64;
  }
  const minions = values.minions === undefined ? 1 : Number(values.minions);
  if (!Number.isInteger(minions) || minions < 1 || minions > 20) {
    process.stderr.write('oduflow-topology: --minions must be an integer from 1 to 20\n');
    return 64;
  }
  const options: TopologyOptions = { minions };
  if (values.dir !== undefined) options.dir = values.dir;
  if (values.keep) options.keepDir = true;
  if (values['log-level'] !== undefined) options.logLevel = values['log-level'];
  if (values['no-module']) options.installModule = false;

  const startedAt = Date.now();
  const topology = await startTopology(options);
  let stopping = false;
  const shutdown = (signalName: string) => {
    if (stopping) return;
    stopping = true;
    process.stderr.write(`oduflow-topology: ${signalName}, tearing down\n`);
    topology.stop().then(
      () => process.exit(0),
      (error: unknown) => {
        process.stderr.write(`oduflow-topology: teardown failed: ${error instanceof Error ? error.message : String(error)}\n`);
        process.exit(1);
      },
    );
  };
  process.on('SIGINT', () => shutdown('SIGINT'));
  process.on('SIGTERM', () => shutdown('SIGTERM'));
  const info = {
    dir: topology.dir,
    saltApiUrl: topology.saltApiUrl,
    username: topology.username,
    passwordFile: topology.passwordFile,
    eauth: topology.eauth,
    minionIds: topology.minionIds,
    receiptDirs: Object.fromEntries(topology.minionIds.map((id) => [id, topology.receiptDir(id)])),
    markerFiles: Object.fromEntries(topology.minionIds.map((id) => [id, topology.markerFile(id)])),
    ports: topology.ports,
    masterConfigDir: topology.masterConfigDir,
    fileRoot: topology.fileRoot,
    moduleSha256: topology.moduleSha256,
    pid: process.pid,
    startupMs: Date.now() - startedAt,
  };
  process.stdout.write(`${JSON.stringify(info)}\n`);
  // Stay in the foreground until a signal arrives.
  setInterval(() => undefined, 1 << 30);
  return -1;
}

main(process.argv.slice(2)).then(
  (code) => {
    if (code >= 0) process.exitCode = code;
  },
  (error: unknown) => {
    process.stderr.write(`oduflow-topology: ${error instanceof Error ? error.message : String(error)}\n`);
    process.exitCode = 1;
  },
);
