import { main } from '../../src/main.js';
import { HOSTILE_PATH, HOSTILE_SECRET } from './hostile.js';

/*
 * Test-only entry of the rollout tests: the real CLI (main) in a real
 * process, with one seam armed by the first argument. The shipped
 * executable (src/cli.ts) passes no seam.
 *
 *   node rollout-cli.mjs <directive> <oduflow-master arguments...>
 *
 *   none                          no seam
 *   kill:<kind>[:<stage index>]   SIGKILL right after that rollout checkpoint (start, before_stage, after_stage, end)
 *   kill:<P1|P2|P3|P4>:<n>        SIGKILL at the n-th time the master reaches that crash point (mid-stage)
 *   throw:<P1|P2|P3|P4>           throw a hostile Error there (a message holding a fake secret and a path)
 */

const [directive = 'none', ...argv] = process.argv.slice(2);
const [verb, point, nth] = directive.split(':');
const die = (): void => void process.kill(process.pid, 'SIGKILL');
let reached = 0;

const crashAt = (at: string): void => {
  if (at !== point) return;
  if (verb === 'throw') throw new Error(`connect failed: password=${HOSTILE_SECRET} read from ${HOSTILE_PATH}`);
  reached += 1;
  if (verb === 'kill' && reached === Number(nth ?? '1')) die();
};
const rolloutCheckpoint = (kind: string, stageIndex: number | null): void => {
  if (verb === 'kill' && kind === point && (nth === undefined || Number(nth) === stageIndex)) die();
};

process.exitCode = await main(
  argv,
  process.env,
  { stdout: (text) => process.stdout.write(text), stderr: (text) => process.stderr.write(text) },
  verb === 'none' ? {} : { crashAt, rolloutCheckpoint },
);
