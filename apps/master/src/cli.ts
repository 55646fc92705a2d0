import { abandonedWork } from './commands.js';
import { main } from './main.js';

/*
 * The `oduflow-master` executable: stdout carries tables or JSON, stderr
 * carries pino logs and error lines; the exit status follows exit-codes.ts.
 */
const code = await main(process.argv.slice(2), process.env, {
  stdout: (text) => process.stdout.write(text),
  stderr: (text) => process.stderr.write(text),
});
process.exitCode = code;
// A watch stopped mid-round: do not wait for the abandoned salt-api call.
if (abandonedWork.value) process.exit(code);
