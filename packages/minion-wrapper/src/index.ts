export * from './errors.js';
export * from './minion-id.js';
export * from './module-asset.js';
export * from './client-receipts.js';
export * from './cloud-init.js';
export * from './file-tree.js';
export * from './verify.js';
