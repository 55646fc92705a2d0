import { defineConfig } from 'tsup';
import { sharedTsupConfig } from '../../tsup.shared.js';

// The CJS build needs import.meta.url to find build/Release/receipt_store.node.
export default defineConfig(sharedTsupConfig({ shims: true }));
