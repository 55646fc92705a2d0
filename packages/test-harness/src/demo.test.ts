import { describe, expect, it } from 'vitest';
import { asciiTable, counts, evidenceTable, findMasterCli, hasReceiptShape, parseCliJson, seconds, shortId } from './demo.js';

describe('demo helpers', () => {
  it('renders a plain-ASCII table with aligned columns and - for empty cells', () => {
    expect(asciiTable(['a', 'long header'], [['xyz', 1], [null, '']], '  ')).toBe(
      [
        '  +-----+-------------+',
        '  | a   | long header |',
        '  +-----+-------------+',
        '  | xyz | 1           |',
        '  | -   | -           |',
        '  +-----+-------------+',
      ].join('\n'),
    );
    expect(asciiTable(['only'], [])).toBe(['+------+', '| only |', '+------+', '+------+'].join('\n'));
  });

  it('prints the evidence columns in order, ASCII only', () => {
    const table = evidenceTable([
      { command: 'poll', request: '8512e168', minion: 'A 94e16732', profile: 'configure', jid: '20261129093856169000', state: 'succeeded', counts: '5/5', marker: '1', exit: 0 },
    ]);
    const lines = table.split('\n');
    expect(lines[1]).toBe('  | command | request  | minion     | profile   | jid                  | state     | passed | marker | exit |');
    expect(lines[3]).toBe('  | poll    | 8512e168 | A 94e16732 | configure | 20261129093856169000 | succeeded | 5/5    | 1      | 0    |');
    expect(/^[\x20-\x7e\n]*$/.test(table)).toBe(true);
  });

  it('shortens request and minion ids to their first UUID block', () => {
    expect(shortId('8512e168-e34b-4318-a13a-1e6a30985c94')).toBe('8512e168');
    expect(shortId('client-94e16732-e135-40a2-b4e2-c58bc944345a')).toBe('94e16732');
    expect(shortId(null)).toBe('-');
    expect(shortId('')).toBe('-');
  });

  it('formats counts and durations', () => {
    expect(counts(5, 5)).toBe('5/5');
    expect(counts(0, 0)).toBe('0/0');
    expect(counts(null, null)).toBe('-');
    expect(seconds(1234)).toBe('1.2 s');
  });

  it('accepts exactly the 9 receipt fields', () => {
    const receipt = {
      protocol: 1,
      minion_id: 'client-94e16732-e135-40a2-b4e2-c58bc944345a',
      request_id: '8512e168-e34b-4318-a13a-1e6a30985c94',
      jid: '20261129093856169000',
      profile: 'configure',
      state_digest: '',
      status: 'succeeded',
      passed: 5,
      total: 5,
    };
    expect(hasReceiptShape(receipt)).toBe(true);
    expect(hasReceiptShape({ ...receipt, comment: 'x' })).toBe(false);
    const { total: _total, ...missing } = receipt;
    expect(hasReceiptShape(missing)).toBe(false);
    expect(hasReceiptShape([receipt])).toBe(false);
    expect(hasReceiptShape(null)).toBe(false);
  });

  it("parses the CLI's last JSON line and nothing else", () => {
    expect(parseCliJson('{"outcome":"published","records":[]}\n')).toEqual({ outcome: 'published', records: [] });
    expect(parseCliJson('noise\n{"error":{"code":"target_blocked"}}\n\n')).toEqual({ error: { code: 'target_blocked' } });
    expect(parseCliJson('')).toBeNull();
    expect(parseCliJson('not json\n')).toBeNull();
    expect(parseCliJson('[1]\n')).toBeNull();
  });

  it('finds apps/master/dist/cli.js from inside the repository, or reports null', () => {
    const found = findMasterCli();
    if (found !== null) expect(found.endsWith('/apps/master/dist/cli.js')).toBe(true);
    expect(findMasterCli('/')).toBeNull();
  });
});
