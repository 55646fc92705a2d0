export {
  EXIT,
  cloudInitCommand,
  fileTreeCommand,
  formatTable,
  jsonError,
  verifyCommand,
  type CloudInitArgs,
} from './commands.js';
