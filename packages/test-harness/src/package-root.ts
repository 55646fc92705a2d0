import { createRequire } from 'node:module';
import { dirname } from 'node:path';

let root: string | undefined;

/**
 * Absolute path of the installed @oduflow/test-harness (fixtures/ and
 * python/ ship beside dist/ and src/). Node's resolver finds it through the
 * package's own `./package.json` export, from the ESM build, the CJS build
 * (tsup's shim gives it import.meta.url) or the sources under vitest alike;
 * looked up on first use, so importing the package reads nothing.
 */
export function harnessRoot(): string {
  root ??= dirname(createRequire(import.meta.url).resolve('@oduflow/test-harness/package.json'));
  return root;
}
