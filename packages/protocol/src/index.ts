export * from './constants.js';
export * from './errors.js';
export * from './identity.js';
export * from './canonical-json.js';
export * from './high-data.js';
export * from './reduce.js';
export * from './answers.js';
export * from './request-record.js';
