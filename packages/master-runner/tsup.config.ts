import { defineConfig } from 'tsup';

export default defineConfig({
  // The PostgreSQL store is its own entry (the ./postgres subpath): the root entry never imports pg.
  entry: { index: 'src/index.ts', 'postgres/index': 'src/postgres/index.ts' },
  format: ['esm', 'cjs'],
  dts: true,
  clean: true,
  sourcemap: true,
  target: 'node20',
});
