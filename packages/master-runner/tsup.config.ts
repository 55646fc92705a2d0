import { defineConfig } from 'tsup';
import { sharedTsupConfig } from '../../tsup.shared.js';

// ./internal is its own entry: what oduflow's tests and apps need, kept off the root API.
export default defineConfig(sharedTsupConfig({ entry: { index: 'src/index.ts', internal: 'src/internal.ts' } }));
