export * from './fixtures.js';
export * from './store-conformance.js';
export * from './topology.js';
