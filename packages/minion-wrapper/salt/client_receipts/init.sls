# oduflow client_receipts: keeps the reviewed oduflow_job execution module
# installed in this minion's extension-module directory.
#
# This file is a template: `oduflow-minion file-tree` replaces the digest
# placeholder below with the reviewed SHA-256 of salt://oduflow/oduflow_job.py
# when it writes the tree a master serves. An unrendered template fails
# closed: the placeholder is not a valid hash.
#
# The module is served OUTSIDE `_modules/` on purpose: saltutil.sync_* (run
# by every highstate when autoload_dynamic_modules is True) copies whatever
# the master serves under `_modules/` into extmods with no digest check. The
# cloud-init minion config sets autoload_dynamic_modules: false and
# clean_dynamic_modules: false, so neither a highstate nor a sync installs or
# deletes this module; only the states below manage it. The same config
# schedules this state on the minion itself (hourly by default, with splay),
# so the module stays managed after the first boot.
#
# Why three states: for a salt:// source, file.managed ignores source_hash and
# trusts the master's own hash of the file, so it cannot pin a reviewed
# digest. The served module is therefore fetched into a private staging file,
# its digest is checked (this state fails when the master serves other
# bytes), and only then is the installed file managed from that local copy
# with source_hash, which Salt verifies for local sources. A mismatch anywhere
# leaves the installed module as it was (fail closed); when the installed
# module already matches the digest nothing is copied.
#
# Dry run (test=True): the staging file is not written, so the install state
# cannot compare against it. The dry run therefore checks what it can without
# writing: the master's hash of the served module (cp.hash_file) against the
# reviewed digest, and the installed module's digest; it reports "would
# install" (result None) or "matches" (True), and fails when the master
# serves other bytes.
{%- set reviewed_sha256 = '@ODUFLOW_MODULE_SHA256@' %}
{%- set served = 'salt://oduflow/oduflow_job.py' %}
{%- set staged = opts['cachedir'] ~ '/oduflow/oduflow_job.py.staged' %}
{%- set installed = opts['extension_modules'] ~ '/modules/oduflow_job.py' %}
{%- set dry_run = opts.get('test', False) is sameas true %}

oduflow_job_module_staged:
  file.managed:
    - name: {{ staged | yaml_dquote }}
    - source: {{ served | yaml_dquote }}
    - user: root
    - group: root
    - mode: '0600'
    - dir_mode: '0700'
    - makedirs: True
    - show_changes: False
{%- if dry_run %}
{%- set served_hash = salt['cp.hash_file'](served) or {} %}

oduflow_job_module_digest:
{%- if served_hash.get('hash_type') == 'sha256' and served_hash.get('hsum') == reviewed_sha256 %}
  test.succeed_without_changes:
    - comment: 'dry run: the served module matches the reviewed SHA-256'
{%- else %}
  test.fail_without_changes:
    - comment: 'dry run: the served module does not match the reviewed SHA-256'
{%- endif %}
    - require:
      - file: oduflow_job_module_staged

oduflow_job_module:
{%- if salt['file.file_exists'](installed) and not salt['file.is_link'](installed)
      and salt['file.get_hash'](installed, 'sha256') == reviewed_sha256 %}
  test.succeed_without_changes:
    - comment: 'dry run: the installed module matches the reviewed SHA-256'
{%- else %}
  test.configurable_test_state:
    - changes: True
    - result: True
    - comment: 'dry run: would install the reviewed module from the staged copy'
{%- endif %}
    - require:
      - test: oduflow_job_module_digest
{%- else %}

oduflow_job_module_digest:
  module.run:
    - file.check_hash:
      - path: {{ staged | yaml_dquote }}
      - file_hash: sha256={{ reviewed_sha256 }}
    - require:
      - file: oduflow_job_module_staged

oduflow_job_module:
  file.managed:
    - name: {{ installed | yaml_dquote }}
    - source: {{ staged | yaml_dquote }}
    - source_hash: sha256={{ reviewed_sha256 }}
    - user: root
    - group: root
    - mode: '0644'
    - makedirs: True
    - show_changes: False
    # Reload this process's modules when the file was repaired (salt-call).
    - reload_modules: True
    - require:
      - module: oduflow_job_module_digest
{%- if opts.get('__cli') != 'salt-call' %}

# A repaired module is visible to the running minion's new job workers only
# after it reloads its modules. Rendered only when a minion daemon runs this
# state (state.apply from the master, or the minion's own schedule): under
# salt-call there may be no daemon to signal (event.fire returns False and
# would fail a successful repair);
# the salt-call process reloads its own modules (reload_modules above), and a
# running daemon is signalled with `salt-call saltutil.refresh_modules`.
oduflow_job_module_reload:
  module.run:
    - saltutil.refresh_modules:
    - onchanges:
      - file: oduflow_job_module
{%- endif %}
{%- endif %}
