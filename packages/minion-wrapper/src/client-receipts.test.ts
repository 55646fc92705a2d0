import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { MODULE_SHA256_PLACEHOLDER, clientReceiptsSlsPath, moduleSha256, renderClientReceiptsSls } from './index.js';

describe('the client_receipts state', () => {
  it('references the reviewed module digest as the source_hash of the managed module file', () => {
    const sls = renderClientReceiptsSls();
    expect(sls).toContain(`{%- set reviewed_sha256 = '${moduleSha256()}' %}\n`);
    expect(sls).toContain('- source_hash: sha256={{ reviewed_sha256 }}\n');
    expect(sls).toContain('- file_hash: sha256={{ reviewed_sha256 }}\n');
    // served outside _modules/ (saltutil.sync_* would install it unchecked)
    expect(sls).toContain("{%- set served = 'salt://oduflow/oduflow_job.py' %}\n");
    expect(sls).toContain('- source: {{ served | yaml_dquote }}\n');
    expect(sls).toContain('- source: {{ staged | yaml_dquote }}\n');
    expect(sls).toContain("{%- set installed = opts['extension_modules'] ~ '/modules/oduflow_job.py' %}\n");
    expect(sls).toContain('- name: {{ installed | yaml_dquote }}\n');
    // every rendered path is a quoted YAML scalar
    expect(sls).not.toMatch(/{{ (staged|installed|served) }}/);
    expect(sls).not.toContain(MODULE_SHA256_PLACEHOLDER);
    expect(sls.match(/[0-9a-f]{64}/g)).toEqual([moduleSha256()]);
  });

  it('ships as a template holding the digest placeholder exactly once', () => {
    const template = readFileSync(clientReceiptsSlsPath(), 'utf8');
    expect(template.split(MODULE_SHA256_PLACEHOLDER)).toHaveLength(2);
  });

  it('renders another digest only when it is 64 lowercase hex characters', () => {
    expect(renderClientReceiptsSls('a'.repeat(64))).toContain(`reviewed_sha256 = '${'a'.repeat(64)}'`);
    for (const bad of ['A'.repeat(64), 'a'.repeat(63), `${'a'.repeat(64)}\n`, '']) {
      expect(() => renderClientReceiptsSls(bad)).toThrow(expect.objectContaining({ code: 'invalid_sha256' }));
    }
  });
});
