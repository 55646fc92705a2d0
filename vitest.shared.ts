// Shared vitest settings: every package writes a JSON report under
// <root>/.test-results so scripts/summarize-tests.mjs can total all suites.
import { basename, dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { ViteUserConfig } from 'vitest/config';

const root = dirname(fileURLToPath(import.meta.url));

export function sharedTestConfig(packageDir: string, overrides: NonNullable<ViteUserConfig['test']> = {}): ViteUserConfig {
  const name = basename(packageDir);
  return {
    test: {
      include: ['src/**/*.test.ts', 'tests/**/*.test.ts'],
      reporters: ['default', ['json', { outputFile: resolve(root, '.test-results', `vitest-${name}.json`) }]],
      pool: 'forks',
      testTimeout: 30_000,
      hookTimeout: 60_000,
      ...overrides,
    },
  };
}
