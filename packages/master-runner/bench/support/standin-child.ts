import { startSaltApiStandIn } from '../../tests/support/salt-api-standin.js';

/*
 * The salt-api stand-in in a process of its own, for the poll-sweep bench:
 * argv[2] is the delay before every `local` answer (ms). Every status call is
 * answered `running` (a fleet whose applies are still going), bound to the
 * request it asks about. Prints {url, username, password} as one JSON line.
 */

const callDelayMs = Number(process.argv[2] ?? '20');
const standIn = await startSaltApiStandIn({ callDelayMs, recordCalls: false });
standIn.status = (args, minionId) => {
  const [requestId, jid, profile, digest] = args as string[];
  return {
    retcode: 0,
    ret: { protocol: 1, minion_id: minionId, request_id: requestId, jid, profile, state_digest: digest, status: 'running', passed: 0, total: 0 },
  };
};
process.stdout.write(`${JSON.stringify({ url: standIn.url, username: standIn.username, password: standIn.password })}\n`);
process.on('SIGTERM', () => {
  void standIn.close().then(() => process.exit(0));
});
