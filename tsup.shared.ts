// Shared tsup settings: every package builds ESM + CJS with declarations and
// source maps for Node 20; each package's tsup.config.ts passes its own
// entries and what differs (shims for import.meta.url in CJS, a bin banner).
import type { Options } from 'tsup';

export function sharedTsupConfig(overrides: Options = {}): Options {
  return {
    entry: ['src/index.ts'],
    format: ['esm', 'cjs'],
    dts: true,
    clean: true,
    sourcemap: true,
    target: 'node20',
    ...overrides,
  };
}
