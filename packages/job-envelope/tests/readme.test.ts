import { spawnSync } from 'node:child_process';
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { scratchDir } from './support/fixtures.js';

/*
 * The README's example is run as written, against the built package (as a
 * user would import it), so the documentation cannot drift from the API.
 */

const packageDir = resolve(dirname(fileURLToPath(import.meta.url)), '..');

function readmeExample(): string {
  const readme = readFileSync(join(packageDir, 'README.md'), 'utf8');
  const section = readme.slice(readme.indexOf('## Example'));
  const match = /```js\n([\s\S]*?)```/.exec(section);
  if (match === null) throw new Error('the README has no js example');
  return match[1] as string;
}

describe('the README example', () => {
  it('runs as written and prints what the README says', () => {
    // Inside the package, so `@oduflow/job-envelope` resolves to this package's built dist.
    const file = join(packageDir, 'build', `readme-example-${process.pid}.mjs`);
    mkdirSync(dirname(file), { recursive: true });
    writeFileSync(file, readmeExample());
    const scratch = scratchDir('job-envelope-readme-'); // the example's os.tmpdir(), removed afterwards
    const run = spawnSync(process.execPath, [file], { encoding: 'utf8', timeout: 20_000, env: { ...process.env, TMPDIR: scratch.dir } });
    scratch.remove();
    rmSync(file, { force: true });
    expect(run.status, run.stderr).toBe(0);
    const lines = run.stdout.trim().split('\n');
    expect(lines.slice(0, 6)).toEqual(['start ', 'before_stage batch-1', 'after_stage batch-1', 'before_stage batch-2', 'after_stage batch-2', 'end ']);
    expect(lines[6]).toBe('succeeded { succeeded: 2 }');
    expect(lines[7]).toBe('succeeded');
    expect(lines[8]).toMatch(/^\[ '[0-9a-f-]{36} succeeded' \]$/);
    expect(lines[9]).toBe('run_finished');
  });
});
