import { closeSync, mkdtempSync, openSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { createMasterLogger } from './logger.js';

describe('createMasterLogger', () => {
  it('redacts passwords, tokens, state data and legacy fields even when a caller passes them by mistake', () => {
    const dir = mkdtempSync(join(tmpdir(), 'oduflow-log-'));
    const path = join(dir, 'log');
    const fd = openSync(path, 'w');
    try {
      const logger = createMasterLogger({ fd });
      logger.info(
        {
          request_id: 'r',
          password: 'pw-1',
          token: 'tok-1',
          state_data_json: '{"secret":1}',
          salt: { password: 'pw-2', token: 'tok-2', headers: { 'x-auth-token': 'tok-3' } },
          record: { legacy_fields: { raw: 'raw-output' } },
          req: { headers: { authorization: 'Bearer tok-4' }, body: { state_data: { s: 'body-secret' } } },
          authorization: 'Bearer tok-5',
          state_data: { s: 'data-secret' },
        },
        'something happened',
      );
      logger.flush();
      const line = readFileSync(path, 'utf8');
      expect(JSON.parse(line)).toMatchObject({ request_id: 'r', msg: 'something happened' });
      for (const secret of ['pw-1', 'pw-2', 'tok-1', 'tok-2', 'tok-3', 'tok-4', 'tok-5', '"secret"', 'raw-output', 'body-secret', 'data-secret']) expect(line).not.toContain(secret);
    } finally {
      closeSync(fd);
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
