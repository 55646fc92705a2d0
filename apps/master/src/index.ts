export { main, type Io } from './main.js';
export { EXIT, EXIT_FOR_ERROR, type ExitCode } from './exit-codes.js';
