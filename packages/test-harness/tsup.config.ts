import { defineConfig } from 'tsup';

export default defineConfig({
  entry: ['src/index.ts', 'src/topology-cli.ts', 'src/demo-cli.ts', 'src/fuzz-cli.ts', 'src/model-cli.ts'],
  format: ['esm', 'cjs'],
  dts: true,
  clean: true,
  sourcemap: true,
  target: 'node20',
  shims: true,
});
