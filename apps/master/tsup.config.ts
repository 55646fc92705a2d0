import { defineConfig } from 'tsup';
import { sharedTsupConfig } from '../../tsup.shared.js';

// An application, not a library: one ESM executable with its shebang.
export default defineConfig(
  sharedTsupConfig({ entry: { cli: 'src/cli.ts' }, format: ['esm'], dts: false, banner: { js: '#!/usr/bin/env node' } }),
);
