import { describe, expect, it } from 'vitest';
import { createExchangeGate, type ExchangeKind } from './exchange-gate.js';

/** A unit of work the test finishes by hand, recording when it ran. */
function held(log: string[], name: string): { work: () => Promise<void>; finish: () => void } {
  let finish!: () => void;
  const done = new Promise<void>((resolve) => (finish = resolve));
  return {
    work: async () => {
      log.push(`start ${name}`);
      await done;
      log.push(`end ${name}`);
    },
    finish,
  };
}

const tick = () => new Promise((resolve) => setImmediate(resolve));

describe('exchange gate', () => {
  it('runs reads together, up to the limit', async () => {
    const gate = createExchangeGate(2);
    const log: string[] = [];
    const units = ['r1', 'r2', 'r3'].map((n) => held(log, n));
    const runs = units.map((u) => gate.run('read', u.work));
    await tick();
    expect(log).toEqual(['start r1', 'start r2']);
    expect(gate.readsInFlight).toBe(2);
    units[0]?.finish();
    await tick();
    expect(log).toContain('start r3');
    units.forEach((u) => u.finish());
    await Promise.all(runs);
  });

  it('starts a publication only when no read is in flight, and holds back reads that arrive after it', async () => {
    const gate = createExchangeGate(8);
    const log: string[] = [];
    const read1 = held(log, 'r1');
    const pub = held(log, 'p');
    const read2 = held(log, 'r2');
    const runs = [gate.run('read', read1.work), gate.run('publication', pub.work), gate.run('read', read2.work)];
    await tick();
    expect(log).toEqual(['start r1']);
    read1.finish();
    await tick();
    expect(log).toEqual(['start r1', 'end r1', 'start p']);
    pub.finish();
    await tick();
    expect(log).toEqual(['start r1', 'end r1', 'start p', 'end p', 'start r2']);
    read2.finish();
    await Promise.all(runs);
  });

  it('never lets a publication overlap another exchange, whatever the arrival order', async () => {
    const gate = createExchangeGate(4);
    let reads = 0;
    let publications = 0;
    let overlaps = 0;
    const kinds: ExchangeKind[] = Array.from({ length: 60 }, (_, i) => (i % 5 === 2 ? 'publication' : 'read'));
    await Promise.all(
      kinds.map((kind, i) =>
        gate.run(kind, async () => {
          if (kind === 'publication') publications += 1;
          else reads += 1;
          if (publications > 1 || (publications === 1 && reads > 0)) overlaps += 1;
          await new Promise((resolve) => setTimeout(resolve, i % 3));
          if (kind === 'publication') publications -= 1;
          else reads -= 1;
        }),
      ),
    );
    expect(overlaps).toBe(0);
  });

  it('releases its slot when the work throws', async () => {
    const gate = createExchangeGate(1);
    await expect(gate.run('publication', () => Promise.reject(new Error('boom')))).rejects.toThrow('boom');
    await expect(gate.run('read', () => Promise.resolve(1))).resolves.toBe(1);
  });
});
