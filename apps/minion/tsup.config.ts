import { defineConfig } from 'tsup';

export default defineConfig([
  {
    entry: ['src/index.ts'],
    format: ['esm', 'cjs'],
    dts: true,
    clean: ['index.*'],
    sourcemap: true,
    target: 'node20',
  },
  {
    // The `oduflow-minion` bin: ESM only; the #!/usr/bin/env node line of
    // src/cli.ts is kept and tsup marks the output executable.
    entry: ['src/cli.ts'],
    format: ['esm'],
    dts: false,
    clean: ['cli.*'],
    sourcemap: true,
    target: 'node20',
  },
]);
