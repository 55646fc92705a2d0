export * from './constants.js';
export * from './errors.js';
