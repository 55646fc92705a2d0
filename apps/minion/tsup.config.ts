import { defineConfig } from 'tsup';
import { sharedTsupConfig } from '../../tsup.shared.js';

export default defineConfig([
  sharedTsupConfig({ clean: ['index.*'] }),
  // The `oduflow-minion` bin: ESM only; the #!/usr/bin/env node line of
  // src/cli.ts is kept and tsup marks the output executable.
  sharedTsupConfig({ entry: ['src/cli.ts'], format: ['esm'], dts: false, clean: ['cli.*'] }),
]);
