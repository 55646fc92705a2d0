#!/usr/bin/env node
import { Command, CommanderError } from 'commander';
import {
  DEFAULT_CLIENT_RECEIPTS_INTERVAL_SECONDS,
  DEFAULT_CLIENT_RECEIPTS_SPLAY_SECONDS,
  DEFAULT_EXTMODS_DIR,
  MinionWrapperError,
} from '@oduflow/minion-wrapper';
import { EXIT, cloudInitCommand, fileTreeCommand, formatTable, jsonError, verifyCommand, type CloudInitArgs } from './commands.js';

/** With --json anywhere on the command line, errors are one JSON document on stdout. */
const json = process.argv.slice(2).includes('--json');

const program = new Command()
  .name('oduflow-minion')
  .description('Minion-side bootstrap for oduflow: cloud-init fragment, Salt file tree, install verification.')
  .exitOverride();
if (json) {
  // commander's own messages would go to stderr; the JSON error replaces them
  program.configureOutput({ outputError: () => undefined });
} else {
  program.showHelpAfterError();
}

program
  .command('cloud-init')
  .description('print the #cloud-config fragment that installs and verifies oduflow_job before salt-minion starts')
  .requiredOption('--minion-id <id>', 'client-<uuid> (canonical lowercase RFC 9562 UUID)')
  .requiredOption('--master <host>', 'Salt master host name or IP address')
  .option('--extmods <dir>', 'minion extension-module directory', DEFAULT_EXTMODS_DIR)
  .option(
    '--client-receipts-interval <seconds>',
    `seconds between the minion's scheduled client_receipts applies, 60 to 604800 (default ${DEFAULT_CLIENT_RECEIPTS_INTERVAL_SECONDS})`,
  )
  .option(
    '--client-receipts-splay <seconds>',
    `random extra delay per scheduled run, 1 to the interval (default ${DEFAULT_CLIENT_RECEIPTS_SPLAY_SECONDS})`,
  )
  .action((options: CloudInitArgs) => {
    process.stdout.write(cloudInitCommand(options));
  });

program
  .command('file-tree')
  .description('write the Salt file tree a master serves: oduflow/oduflow_job.py, client_receipts/init.sls, SHA256SUMS')
  .requiredOption('--out <dir>', 'file_roots directory to write into (other files are left alone)')
  .option('--json', 'machine-readable output')
  .action((options: { out: string; json?: boolean }) => {
    const tree = fileTreeCommand(options.out);
    if (options.json) {
      process.stdout.write(`${JSON.stringify(tree)}\n`);
    } else {
      process.stdout.write(
        formatTable([
          ['dir', tree.dir],
          ['module_version', tree.moduleVersion],
          ...tree.files.map((file): [string, string] => [file.path, `sha256 ${file.sha256}  ${file.bytes} bytes`]),
        ]),
      );
    }
  });

program
  .command('verify')
  .description('check <extmods>/modules/oduflow_job.py against the reviewed digest (exit 0 ok, 2 mismatch or missing)')
  .requiredOption('--extmods <dir>', 'minion extension-module directory')
  .option('--json', 'machine-readable output')
  .action((options: { extmods: string; json?: boolean }) => {
    const result = verifyCommand(options.extmods);
    if (options.json) {
      process.stdout.write(`${JSON.stringify(result)}\n`);
    } else {
      process.stdout.write(
        formatTable([
          ['status', result.status],
          ['path', result.path],
          ['expected_sha256', result.expectedSha256],
          ['actual_sha256', result.actualSha256 ?? '-'],
          ['mode', result.mode ?? '-'],
        ]),
      );
    }
    process.exitCode = result.ok ? EXIT.ok : EXIT.refused;
  });

const fail = (exitCode: number, code: string, message: string): void => {
  if (json) process.stdout.write(jsonError(code, message));
  else process.stderr.write(`oduflow-minion: ${code}: ${message}\n`);
  process.exitCode = exitCode;
};

try {
  await program.parseAsync(process.argv);
} catch (error) {
  if (error instanceof CommanderError) {
    if (error.exitCode === 0) {
      process.exitCode = EXIT.ok; // help and version
    } else if (json) {
      fail(EXIT.refused, 'usage', error.message.replace(/^error: /, ''));
    } else {
      process.exitCode = EXIT.refused; // commander already printed the usage error
    }
  } else if (MinionWrapperError.isInstance(error)) {
    fail(error.code === 'module_asset_unreadable' ? EXIT.internal : EXIT.refused, error.code, error.message);
  } else {
    fail(EXIT.internal, 'internal', `internal error: ${error instanceof Error ? error.message : String(error)}`);
  }
}
