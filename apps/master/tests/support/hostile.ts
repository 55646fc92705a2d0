/** What the hostile exception of the rollout tests carries: neither may ever reach a report, a log line or the CLI's output. */
export const HOSTILE_SECRET = 'hunter2-salt-api-password-0000';
export const HOSTILE_PATH = '/etc/oduflow/secret/salt-api.password';
