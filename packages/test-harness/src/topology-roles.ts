/**
 * Test roles served by the local topology's master (file_roots `roles/`).
 * Every role touches only the minion's private work dir and appends exactly
 * one line (its role name) to the minion's side-effect marker file, so a test
 * counts real executions by counting lines. The minion config of the topology
 * supplies `oduflow_test_marker` and `oduflow_test_workdir` (read via `opts`).
 */

const header = (role: string) => `# oduflow topology test role ${role} (touches only the topology's temp dir)
{%- set marker = opts['oduflow_test_marker'] %}
{%- set work = opts['oduflow_test_workdir'] %}
`;

const markerState = (id: string, role: string) => `${id}:
  cmd.run:
    - name: echo ${role} >> {{ marker }}
`;

/** `configure`: five states, all succeed. */
export const CLIENT_STACK_SLS = `${header('roles.client_stack')}${markerState('client_stack_marker', 'roles.client_stack')}
client_stack_dir:
  file.directory:
    - name: {{ work }}/client_stack
    - makedirs: True

client_stack_config:
  file.managed:
    - name: {{ work }}/client_stack/app.conf
    - contents: configured
    - require:
      - file: client_stack_dir

client_stack_check:
  test.succeed_without_changes: []

client_stack_done:
  test.succeed_with_changes: []
`;

/** `production`: four states, all succeed. */
export const CLIENT_PRODUCTION_SLS = `${header('roles.client_production')}${markerState('client_production_marker', 'roles.client_production')}
client_production_release:
  file.managed:
    - name: {{ work }}/production.release
    - contents: released
    - makedirs: True

client_production_check:
  test.succeed_without_changes: []

client_production_done:
  test.succeed_with_changes: []
`;

/**
 * `volume_resize`: the marker first, then a slow `sleep` (its cwd is the work
 * dir, so teardown finds it), then one more state. A test kills the minion's
 * job worker while the sleep runs: the marker then reads 1 and stays 1.
 */
export function clientStorageResizeSls(slowSeconds: number): string {
  return `${header('roles.client_storage_resize')}${markerState('client_storage_resize_marker', 'roles.client_storage_resize')}
client_storage_resize_slow:
  cmd.run:
    - name: sleep ${slowSeconds}
    - cwd: {{ work }}
    - require:
      - cmd: client_storage_resize_marker

client_storage_resize_done:
  test.succeed_without_changes:
    - require:
      - cmd: client_storage_resize_slow
`;
}

/** `credentials`: three states, one fails (reduces to `failed`, 2/3). */
export const CLIENT_CREDENTIALS_SLS = `${header('roles.client_credentials')}${markerState('client_credentials_marker', 'roles.client_credentials')}
client_credentials_check:
  test.succeed_without_changes: []

client_credentials_rotate:
  test.fail_without_changes: []
`;

/**
 * An SLS that fails to render (Jinja syntax error): the minion gets a list
 * of error strings, which reduces to `unknown`. Put it in place of a role
 * (`roles` option or `Topology.setRole`) to exercise render errors; it has no
 * side effect, so the marker stays unchanged.
 */
export const RENDER_ERROR_SLS = `# oduflow topology test role that never renders
{% if %}
never: rendered
`;

/** Marker lines the default roles write (one per execution). */
export const ROLE_MARKERS = Object.freeze({
  configure: 'roles.client_stack',
  production: 'roles.client_production',
  volume_resize: 'roles.client_storage_resize',
  credentials: 'roles.client_credentials',
});

export const DEFAULT_SLOW_STATE_SECONDS = 8;

/** The default test roles, keyed by path relative to the master's file_roots. */
export function defaultTestRoles(slowSeconds: number = DEFAULT_SLOW_STATE_SECONDS): Record<string, string> {
  return {
    'roles/client_stack.sls': CLIENT_STACK_SLS,
    'roles/client_production.sls': CLIENT_PRODUCTION_SLS,
    'roles/client_storage_resize.sls': clientStorageResizeSls(slowSeconds),
    'roles/client_credentials.sls': CLIENT_CREDENTIALS_SLS,
    'roles/render_error.sls': RENDER_ERROR_SLS,
  };
}
