import { MasterRunnerError, createMasterLogger, type Logger } from '@oduflow/master-runner';
import { Command, CommanderError, Option } from 'commander';
import {
  dispatchCommand,
  listCommand,
  pollCommand,
  preflightCommand,
  publishPendingCommand,
  reconcileCommand,
  showCommand,
  type CommandResult,
  type DispatchFlags,
  type ListFlags,
  type PollFlags,
  type PublishPendingFlags,
  type ReconcileFlags,
  type RoundProgress,
  DEFAULT_WATCH_TIMEOUT_MS,
} from './commands.js';
import type { CommonFlags } from './config.js';
import { EXIT, EXIT_FOR_ERROR, type ExitCode } from './exit-codes.js';
import { migrateStoreCommand } from './migrate-store-command.js';
import type { RolloutServeFlags } from './serve/rollout-config.js';
import type { ServeFlags } from './serve/serve-config.js';
import { SCOPES } from './serve/tokens.js';
import { tokenNewCommand, tokenNewText, type TokenNewFlags } from './serve/token-command.js';
import { renderJson, renderTable } from './output.js';
import { registerRolloutCommand } from './rollout/command.js';
import { verifyFleetCommand, type VerifyFleetFlags } from './verify-fleet.js';
import type { Env, Seams, Wiring } from './wiring.js';

export interface Io {
  readonly stdout: (text: string) => void;
  readonly stderr: (text: string) => void;
}

const VERSION = '0.1.0';
const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'silent'] as const;

/** The log level from --log-level (checked by commander) or ODUFLOW_LOG_LEVEL, checked the same way. */
function logLevel(flag: string | undefined, env: Env): string {
  if (flag !== undefined) return flag;
  const value = env['ODUFLOW_LOG_LEVEL'];
  if (value === undefined || value === '') return 'info';
  if (!(LOG_LEVELS as readonly string[]).includes(value)) {
    throw new MasterRunnerError('config_invalid', `ODUFLOW_LOG_LEVEL must be one of ${LOG_LEVELS.join(', ')}`, { detail: 'invalid_log_level' });
  }
  return value;
}

/** Whether the invocation asked for JSON (before any `--` operand separator). */
function wantsJson(argv: readonly string[]): boolean {
  const end = argv.indexOf('--');
  return (end === -1 ? argv : argv.slice(0, end)).includes('--json');
}

/** The options every command accepts, so they may follow the command name. */
function withCommonOptions(command: Command): Command {
  return command
    .option('--json', 'machine-readable output (the same fields as the table)')
    .option('--store <dir|url>', 'record store: a directory, or a postgres:// URL (env ODUFLOW_STORE; default /var/lib/oduflow/master)')
    .option('--store-password-file <path>', 'PostgreSQL only: private (0600) file holding the database password (env ODUFLOW_STORE_PASSWORD_FILE)')
    .option('--store-pool-size <n>', 'PostgreSQL only: connections in the pool (env ODUFLOW_STORE_POOL_SIZE; default 10)')
    .option('--salt-api-url <url>', 'salt-api rest_cherrypy URL (env ODUFLOW_SALT_API_URL)')
    .option('--salt-api-user <name>', 'salt-api user (env ODUFLOW_SALT_API_USER)')
    .option('--salt-api-password-file <path>', 'private (0600) file holding the salt-api password (env ODUFLOW_SALT_API_PASSWORD_FILE)')
    .option('--salt-api-eauth <backend>', 'salt eauth backend (env ODUFLOW_SALT_API_EAUTH; default pam)')
    .option('--call-timeout <ms>', 'deadline of a capability or status call (env ODUFLOW_CALL_TIMEOUT_MS; default 30000)')
    .addOption(new Option('--log-level <level>', 'log level on stderr (env ODUFLOW_LOG_LEVEL)').choices([...LOG_LEVELS]));
}

/** A `poll --watch` round on stderr: a line for people, a JSON line with --json (stdout stays the final report). */
function progressLine(json: boolean, p: RoundProgress): string {
  if (json) return `${JSON.stringify({ progress: 'poll_round', ...p })}\n`;
  return `poll: round ${p.round}: ${p.settled} settled, ${p.waiting.length} waiting${p.waiting.map((r) => ` ${r.request_id}=${r.state}`).join('')}\n`;
}

function errorReport(error: MasterRunnerError): { text: string; json: string } {
  const fields = { code: error.code, detail: error.detail ?? null, request_id: error.requestId ?? null, message: error.message };
  return { text: `error [${error.code}${error.detail === undefined ? '' : `/${error.detail}`}]: ${error.message}\n`, json: `${JSON.stringify({ error: fields })}\n` };
}

/**
 * Runs one CLI invocation and returns its exit status. Never throws and never
 * calls process.exit, so tests can run it in-process. `seams` is for the crash
 * tests' own entry only; the shipped executable passes none.
 */
export async function main(argv: readonly string[], env: Env, io: Io, seams: Seams = {}): Promise<ExitCode> {
  let exitCode: ExitCode = EXIT.ok;
  let logger: Logger | undefined;
  let json = false;

  // F names the options this command declares, as commander parses them.
  // eslint-disable-next-line @typescript-eslint/no-unnecessary-type-parameters -- given explicitly at each command, never inferred
  const run = <F extends object>(work: (w: Wiring, flags: F & CommonFlags, operands: readonly string[]) => Promise<CommandResult>) =>
    async function (this: Command): Promise<void> {
      const flags = this.opts<F & CommonFlags>();
      json = flags.json === true;
      logger = createMasterLogger({ level: logLevel(flags.logLevel, env) }).child({ command: this.name() });
      const result = await work({ flags, env, logger, seams }, flags, this.processedArgs as string[]);
      io.stdout(json ? renderJson(result.report) : renderTable(result.report));
      exitCode = result.exitCode;
    };

  const program = new Command('oduflow-master')
    .description('Dispatch managed Salt applies once, poll their receipts, reconcile what stays unresolved.')
    .version(VERSION)
    .exitOverride()
    .configureOutput({ writeOut: io.stdout, writeErr: io.stderr });

  withCommonOptions(program.command('dispatch'))
    .description('record, then publish one managed apply to one minion')
    .requiredOption('--minion <id>', 'target minion id (client-<uuid>)')
    .requiredOption('--profile <profile>', 'configure | production | volume_resize | credentials | custom')
    .option('--state-data-file <file>', 'canonical JSON high data (custom profile only)')
    .option('--request-id <uuid>', 'caller-chosen request id; makes the dispatch idempotent')
    .action(run<DispatchFlags>((w, flags) => dispatchCommand(w, flags)));

  withCommonOptions(program.command('publish-pending'))
    .description('publish prepared requests (left by a crash or a connection that sent nothing), with their JID')
    .option('--request-id <uuid>', 'only this request')
    .option('--state-data-file <file>', 'the high data of a custom request (checked against its digest)')
    .action(run<PublishPendingFlags>((w, flags) => publishPendingCommand(w, flags)));

  withCommonOptions(program.command('poll'))
    .description('ask minions for the receipts of published requests; never publishes')
    .option('--request-id <uuid>', 'only this request')
    .option('--watch', 'repeat until the requests of the first round are settled')
    .option('--interval <ms>', 'pause between rounds with --watch', '5000')
    .option('--timeout <ms>', 'with --watch: give up after this long (exit 3)', String(DEFAULT_WATCH_TIMEOUT_MS))
    .action(run<PollFlags>((w, flags) => pollCommand(w, flags, (p) => io.stderr(progressLine(json, p)))));

  withCommonOptions(program.command('show'))
    .description('show one request record')
    .argument('<request-id>')
    .action(run((w, _flags, [requestId]) => showCommand(w, requestId ?? '')));

  withCommonOptions(program.command('list'))
    .description('list request records')
    .option('--unresolved', 'only records that block their target')
    .option('--minion <id>', 'only this target')
    .action(run<ListFlags>((w, flags) => listCommand(w, flags)));

  withCommonOptions(program.command('reconcile'))
    .description('resolve a request by operator decision; never publishes')
    .argument('<request-id>')
    .requiredOption('--reason <text>', 'why, for the record')
    .option('--actor <name>', 'who decided (default: the current user)')
    .action(run<ReconcileFlags>((w, flags, [requestId]) => reconcileCommand(w, requestId ?? '', flags)));

  withCommonOptions(program.command('preflight'))
    .description('list legacy records and active unresolved requests')
    .action(run((w) => preflightCommand(w)));

  withCommonOptions(program.command('migrate-store'))
    .description('one-shot: bring a record store of an older release to this format, or re-check its indexes (idempotent)')
    .action(run((w) => migrateStoreCommand(w)));

  withCommonOptions(program.command('migrate'))
    .description('one-shot: bring a PostgreSQL store\'s schema to this release (idempotent)')
    .action(run(async (w) => (await import('./serve/migrate-command.js')).migrateCommand(w)));

  withCommonOptions(program.command('serve'))
    .description('the HTTP service: admission with Idempotency-Key, the outbox relay, the poller and the event recorder, until SIGTERM')
    .option('--host <address>', 'listen address (env ODUFLOW_LISTEN_HOST; default 127.0.0.1)')
    .option('--port <port>', 'listen port, 0 for any free one (env ODUFLOW_LISTEN_PORT; default 8470)')
    .option('--tokens-file <path>', 'private (0600) tokens file: tenants, their minions, hashed bearer tokens (env ODUFLOW_TOKENS_FILE; required)')
    .option('--key-retention-hours <h>', 'how long Idempotency-Keys are kept, at least 24 (env ODUFLOW_KEY_RETENTION_HOURS; default 24)')
    .option('--accept-legacy', 'serve even while active legacy records exist; they keep blocking (env ODUFLOW_ACCEPT_LEGACY=1)')
    .option('--relay-concurrency <n>', 'outbox entries handled at once (env ODUFLOW_RELAY_CONCURRENCY; default 4)')
    .option('--poll-concurrency <n>', 'status calls in flight at once (env ODUFLOW_POLL_CONCURRENCY; default 64)')
    .option('--poll-walk-interval <ms>', 'how often the poller walks the whole backlog (env ODUFLOW_POLL_WALK_INTERVAL_MS; default 30000)')
    .addOption(new Option('--event-stream <on|off>', 'follow salt-api\'s event stream (env ODUFLOW_EVENT_STREAM; default on)').choices(['on', 'off']))
    .option('--rollout-workspace <dir>', 'where rollouts asked for over HTTP run (env ODUFLOW_ROLLOUT_WORKSPACE; default like `rollout`: rollouts/ beside the store directory)')
    .option('--rollout-stage-timeout <ms>', 'how long a rollout batch is polled before what is open is unresolved (env ODUFLOW_ROLLOUT_STAGE_TIMEOUT_MS; default 900000)')
    .option('--rollout-poll-interval <ms>', 'pause between poll rounds of a rollout batch (env ODUFLOW_ROLLOUT_POLL_INTERVAL_MS; default 2000)')
    .option('--rollout-concurrency <n>', 'dispatches and polls of one rollout in flight at once (env ODUFLOW_ROLLOUT_CONCURRENCY; default 8)')
    .action(async function (this: Command): Promise<void> {
      const flags = this.opts<ServeFlags & RolloutServeFlags>();
      logger = createMasterLogger({ level: logLevel(flags.logLevel, env) }).child({ command: 'serve' });
      // Loaded only for serve: the other commands never load fastify and prom-client (~0.4 s each start).
      const { serveCommand } = await import('./serve/serve-command.js');
      exitCode = await serveCommand({ flags, env, logger, seams }, flags, io);
    });

  program
    .command('token')
    .description('bearer tokens for serve')
    .command('new')
    .description('print a fresh random token (once) and the tokens-file entry that admits it; writes nothing')
    .requiredOption('--tenant <name>', 'the tenant the token acts for')
    .requiredOption('--actor <name>', 'who uses it (recorded in reconciliations)')
    .requiredOption('--scope <scope...>', `one or more of ${SCOPES.join(', ')}`)
    .option('--id <name>', 'the entry\'s id (default <tenant>-<actor>-<random>)')
    .option('--json', 'machine-readable output: {"token", "entry"}')
    .action(function (this: Command): void {
      const flags = this.opts<TokenNewFlags & { json?: boolean }>();
      json = flags.json === true;
      const result = tokenNewCommand(flags);
      io.stdout(json ? `${JSON.stringify(result)}\n` : tokenNewText(result));
    });

  withCommonOptions(program.command('verify-fleet'))
    .description('ask every client minion (or the named ones) whether it is ready and runs the reviewed module')
    .option('--minion <id...>', 'only these minions (repeatable)')
    .option('--expected-sha256 <hex>', 'the reviewed module digest (default: the oduflow_job.py of @oduflow/minion-wrapper)')
    .action(run<VerifyFleetFlags>((w, flags) => verifyFleetCommand(w, flags)));

  registerRolloutCommand(program, { withCommonOptions, run, io });

  try {
    await program.parseAsync([...argv], { from: 'user' });
    return exitCode;
  } catch (error) {
    if (error instanceof CommanderError) {
      // --help and --version end here too, with exit code 0.
      if (error.exitCode === 0) return EXIT.ok;
      if (wantsJson(argv)) {
        const fields = { code: 'usage', detail: error.code, request_id: null, message: error.message.replace(/^error: /, '') };
        io.stdout(`${JSON.stringify({ error: fields })}\n`);
      }
      return EXIT_FOR_ERROR.usage;
    }
    if (MasterRunnerError.isInstance(error)) {
      const report = errorReport(error);
      // eslint-disable-next-line @typescript-eslint/no-unnecessary-condition -- set by the command's action, which flow analysis does not follow
      if (json) io.stdout(report.json);
      else io.stderr(report.text);
      logger?.warn({ code: error.code, detail: error.detail, request_id: error.requestId }, 'command refused or failed');
      return EXIT_FOR_ERROR[error.code];
    }
    // An unexpected error: report its type only; its message could carry anything.
    const kind = error instanceof Error ? error.name : typeof error;
    io.stderr(`error [internal]: unexpected ${kind}; see the log\n`);
    // The log gets the type and the stack frames, never the message (the stack's first line repeats it).
    const frames = error instanceof Error && typeof error.stack === 'string' ? error.stack.split('\n').filter((l) => /^\s+at /.test(l)).join('\n') : null;
    logger?.error({ err_type: kind, stack: frames }, 'internal error');
    return EXIT.internal;
  }
}
