import { defineConfig } from 'tsup';
import { sharedTsupConfig } from '../../tsup.shared.js';

// ./internal and ./postgres are their own entries: what oduflow's tests and apps need stays off
// the root API, and the root entry never imports pg.
export default defineConfig(
  sharedTsupConfig({ entry: { index: 'src/index.ts', internal: 'src/internal.ts', 'postgres/index': 'src/postgres/index.ts' } }),
);
