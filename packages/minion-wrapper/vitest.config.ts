import { defineConfig } from 'vitest/config';
import { sharedTestConfig } from '../../vitest.shared.js';

export default defineConfig(
  sharedTestConfig(import.meta.dirname, {
    // file-tree.ts writes through @oduflow/receipt-store. Its ESM build
    // imports `timers/promises` (tsup drops the node: prefix), and vitest
    // 4.1 resolves that bare sub-path built-in against this package's
    // directory when it inlines the dependency (seen only in this package;
    // cause not found). Node loads the built dependency itself instead.
    server: { deps: { external: [/\/packages\/receipt-store\/dist\//] } },
  }),
);
