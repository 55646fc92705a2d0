# oduflow client_receipts: keeps the reviewed oduflow_job execution module
# installed in this minion's extension-module directory.
#
# This file is a template: `oduflow-minion file-tree` replaces the digest
# placeholder below with the reviewed SHA-256 of salt://_modules/oduflow_job.py
# when it writes the tree a master serves. An unrendered template fails
# closed: the placeholder is not a valid hash.
#
# Why three states: for a salt:// source, file.managed ignores source_hash and
# trusts the master's own hash of the file, so it cannot pin a reviewed
# digest. The served module is therefore fetched into a private staging file,
# its digest is checked (this state fails when the master serves other
# bytes), and only then is the installed file managed from that local copy
# with source_hash, which Salt verifies for local sources. A mismatch anywhere
# leaves the installed module as it was (fail closed); when the installed
# module already matches the digest nothing is copied.
{%- set reviewed_sha256 = '@ODUFLOW_MODULE_SHA256@' %}
{%- set staged = opts['cachedir'] ~ '/oduflow/oduflow_job.py.staged' %}

oduflow_job_module_staged:
  file.managed:
    - name: {{ staged }}
    - source: salt://_modules/oduflow_job.py
    - user: root
    - group: root
    - mode: '0600'
    - dir_mode: '0700'
    - makedirs: True
    - show_changes: False

oduflow_job_module_digest:
  module.run:
    - file.check_hash:
      - path: {{ staged }}
      - file_hash: sha256={{ reviewed_sha256 }}
    - require:
      - file: oduflow_job_module_staged

oduflow_job_module:
  file.managed:
    - name: {{ opts['extension_modules'] }}/modules/oduflow_job.py
    - source: {{ staged }}
    - source_hash: sha256={{ reviewed_sha256 }}
    - user: root
    - group: root
    - mode: '0644'
    - makedirs: True
    - show_changes: False
    - require:
      - module: oduflow_job_module_digest

# A repaired module is visible to new job workers only after the minion
# reloads its modules.
oduflow_job_module_reload:
  module.run:
    - saltutil.refresh_modules:
    - onchanges:
      - file: oduflow_job_module
