import { defineConfig } from 'vitest/config';
import { sharedTestConfig } from '../../vitest.shared.js';

// The e2e suite (tests/e2e) starts real Salt topologies: files run one after
// another so two suites never compete for the 2 CI cores, and a topology's
// start-up and teardown get hook time. Each e2e test sets its own timeout.
export default defineConfig(
  sharedTestConfig(import.meta.dirname, {
    fileParallelism: false,
    hookTimeout: 180_000,
    // `*.test-d.ts` files are type tests (expectTypeOf), checked by tsc through vitest.
    typecheck: { enabled: true, include: ['src/**/*.test-d.ts'], tsconfig: './tsconfig.json' },
  }),
);
