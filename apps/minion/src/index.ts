export * from './commands.js';
