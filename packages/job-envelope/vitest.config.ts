import { defineConfig } from 'vitest/config';
import { sharedTestConfig } from '../../vitest.shared.js';

// `*.test-d.ts` files are type tests (expectTypeOf), checked by tsc through vitest.
export default defineConfig(
  sharedTestConfig(import.meta.dirname, {
    typecheck: { enabled: true, include: ['src/**/*.test-d.ts'], tsconfig: './tsconfig.json' },
  }),
);
