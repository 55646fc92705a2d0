import { resolve } from 'node:path';
import { defineConfig } from 'vitest/config';

// The test run Stryker drives for one package (STRYKER_PACKAGE): the package's
// own suites plus the crash-state enumeration of the writes it owns, which
// import that package's sources (so they run against the mutants).
const pkg = process.env['STRYKER_PACKAGE'] ?? 'protocol';
const crashStates: Record<string, string[]> = {
  protocol: [],
  'receipt-store': ['packages/test-harness/tests/crash-states.store.test.ts'],
  'master-runner': ['packages/test-harness/tests/crash-states.master.test.ts'],
};

export default defineConfig({
  test: {
    root: resolve(import.meta.dirname, '..'),
    include: [`packages/${pkg}/src/**/*.test.ts`, `packages/${pkg}/tests/**/*.test.ts`, ...(crashStates[pkg] ?? [])],
    // purity.test.ts reads the source text, which Stryker's instrumentation rewrites (it reads process.env).
    exclude: ['**/node_modules/**', 'packages/protocol/src/purity.test.ts'],
    pool: 'forks',
    setupFiles: [resolve(import.meta.dirname, 'worker-umask.ts')],
    testTimeout: 60_000,
    hookTimeout: 60_000,
  },
});
