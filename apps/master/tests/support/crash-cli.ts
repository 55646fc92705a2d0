import { main } from '../../src/main.js';

/*
 * Test-only entry of the crash tests: the real CLI (main) in a real process,
 * with the crash seam armed at the point named by the first argument, so the
 * process SIGKILLs itself exactly there. The shipped executable (src/cli.ts)
 * has no such argument and passes no seam: nothing can arm it in production.
 *
 *   node crash-cli.mjs <P1|P2|P3|P4|S1|S2> <oduflow-master arguments...>
 */
const [point, ...argv] = process.argv.slice(2);
const killAt = (at: string): void => {
  if (at === point) process.kill(process.pid, 'SIGKILL');
};
process.exitCode = await main(argv, process.env, {
  stdout: (text) => process.stdout.write(text),
  stderr: (text) => process.stderr.write(text),
}, { crashAt: killAt, storeCrashAt: killAt });
