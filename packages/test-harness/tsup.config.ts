import { defineConfig } from 'tsup';
import { sharedTsupConfig } from '../../tsup.shared.js';

// One entry per subpath and no root entry, so importing the fixtures never
// loads vitest (only ./store-conformance does), plus the two bins. The CJS build needs
// import.meta.url to locate the package root (fixtures/, python/).
export default defineConfig(
  sharedTsupConfig({
    entry: {
      fixtures: 'src/fixtures.ts',
      'store-conformance': 'src/store-conformance.ts',
      topology: 'src/topology.ts',
      postgres: 'src/postgres.ts',
      bench: 'src/bench.ts',
      'topology-cli': 'src/topology-cli.ts',
      'demo-cli': 'src/demo-cli.ts',
      'fuzz-cli': 'src/fuzz-cli.ts',
      'model-cli': 'src/model-cli.ts',
    },
    shims: true,
  }),
);
