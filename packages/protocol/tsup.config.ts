import { defineConfig } from 'tsup';
import { sharedTsupConfig } from '../../tsup.shared.js';

export default defineConfig(sharedTsupConfig());
