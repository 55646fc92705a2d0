#!/usr/bin/env node
/**
 * oduflow-demo: the narrated `npm run demo` scenario (see demo.ts) against a
 * real local Salt topology. Exit 0 only when every step's evidence matched;
 * 1 otherwise; 130/143 when interrupted. Always tears down.
 *
 *   oduflow-demo [--slow-seconds N]
 */
import { parseArgs } from 'node:util';
import { createDemo } from './demo.js';

const USAGE = 'usage: oduflow-demo [--slow-seconds N]   (N: seconds the volume_resize state sleeps, default 5)\n';

async function main(argv: string[]): Promise<number> {
  const { values } = parseArgs({
    args: argv,
    options: { 'slow-seconds': { type: 'string' }, help: { type: 'boolean', short: 'h' } },
  });
  if (values.help) {
    process.stdout.write(USAGE);
    return 0;
  }
  const slow = values['slow-seconds'] === undefined ? 5 : Number(values['slow-seconds']);
  if (!Number.isInteger(slow) || slow < 2 || slow > 60) {
    process.stderr.write(`oduflow-demo: --slow-seconds must be an integer from 2 to 60\n${USAGE}`);
    return 2;
  }
  const demo = createDemo({ slowStateSeconds: slow });
  let interrupted = false;
  const onSignal = (sig: NodeJS.Signals) => {
    if (interrupted) return;
    interrupted = true;
    process.stdout.write(`\noduflow-demo: ${sig}, tearing down\n`);
    demo.interrupt().then(
      () => {
        process.stdout.write('oduflow-demo: torn down, no process left\n');
        process.exit(sig === 'SIGINT' ? 130 : 143);
      },
      (error: unknown) => {
        process.stderr.write(`oduflow-demo: teardown failed: ${error instanceof Error ? error.message : String(error)}\n`);
        if (demo.dir !== null) process.stderr.write(`oduflow-demo: see ${demo.dir}\n`);
        process.exit(1);
      },
    );
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  process.on('SIGHUP', onSignal);
  const ok = await demo.run();
  return ok ? 0 : 1;
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (error: unknown) => {
    process.stderr.write(`oduflow-demo: ${error instanceof Error ? error.message : String(error)}\n`);
    process.exitCode = 1;
  },
);
