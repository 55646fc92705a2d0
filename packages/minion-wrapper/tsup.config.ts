import { defineConfig } from 'tsup';
import { sharedTsupConfig } from '../../tsup.shared.js';

// The CJS build needs import.meta.url to locate the package root (salt/).
export default defineConfig(sharedTsupConfig({ shims: true }));
