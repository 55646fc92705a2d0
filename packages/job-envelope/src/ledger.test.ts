import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { codeOf } from '../tests/support/fixtures.js';
import { type CompatibilityFields, resumeFingerprint, sha256Hex } from './fingerprint.js';
import { INTERNAL_STAGE_ERROR, type JobRun, validateLedger } from './ledger.js';

const RUN = '5b0e2f3a-8c1d-4e6f-9a7b-0c1d2e3f4a5b';
const OTHER_RUN = '7c2f3a4b-9d1e-4f60-8b7c-1d2e3f4a5b6c';
const T0 = Date.parse('2026-11-29T10:00:00.000Z');
const at = (offsetMs: number): string => new Date(T0 + offsetMs).toISOString();

interface Shape {
  /** Stage ids of the header. */
  ids: string[];
  /** How many stages have a record (a prefix). */
  reached: number;
  /** Status of the last reached stage (the earlier ones succeeded). */
  frontier: 'running' | 'succeeded' | 'failed';
  /** Whether the header records the run as finished (when the ledger allows it). */
  finished: boolean;
}

type Files = Map<number, Record<string, unknown>>;

function compat(ids: readonly string[]): CompatibilityFields {
  return {
    schema_version: 1,
    workspace_identity_sha256: sha256Hex('ws'),
    job_type: 'rollout',
    dry_run: false,
    spec_version: 1,
    input_sha256: sha256Hex('{}'),
    stage_ids: ids,
  };
}

/** A consistent header and stage records for `shape`, timestamps 10 ms apart. */
function build(shape: Shape): { header: Record<string, unknown>; files: Files } {
  const files: Files = new Map();
  let clock = 10;
  for (let index = 0; index < shape.reached; index++) {
    const last = index === shape.reached - 1;
    const status = last ? shape.frontier : 'succeeded';
    const started = at((clock += 10));
    const finished = status === 'running' ? null : at((clock += 10));
    files.set(index, {
      schema_version: 1,
      run_id: RUN,
      index,
      stage_id: shape.ids[index],
      status,
      started_at: started,
      finished_at: finished,
      attempts: 1,
      error: status === 'failed' ? { ...INTERNAL_STAGE_ERROR } : null,
      state: { done: index },
    });
  }
  const frontier = shape.reached === 0 ? undefined : shape.frontier;
  let status: JobRun['status'] = 'running';
  if (shape.finished && frontier === 'failed') status = 'failed';
  if (shape.finished && frontier === 'succeeded' && shape.reached === shape.ids.length) status = 'succeeded';
  const fields = compat(shape.ids);
  const header = {
    ...fields,
    stage_ids: [...shape.ids],
    run_id: RUN,
    job_id: RUN,
    resumed_from: null,
    fingerprint: resumeFingerprint(fields),
    status,
    job_started_at: at(0),
    created_at: at(5),
    finished_at: status === 'running' ? null : at(clock + 10),
  };
  return { header, files };
}

const shapeArb: fc.Arbitrary<Shape> = fc
  .uniqueArray(fc.stringMatching(/^[a-z][a-z0-9-]{0,8}$/), { minLength: 1, maxLength: 8 })
  .chain((ids) =>
    fc.record({
      ids: fc.constant(ids),
      reached: fc.integer({ min: 0, max: ids.length }),
      frontier: fc.constantFrom('running' as const, 'succeeded' as const, 'failed' as const),
      finished: fc.boolean(),
    }),
  );

const validate = (header: unknown, files: Files): ReturnType<typeof validateLedger> => validateLedger(header, RUN, files);

function refit(header: Record<string, unknown>): Record<string, unknown> {
  // An attacker who also recomputes the stored fingerprint: the header is then self-consistent again.
  return { ...header, fingerprint: resumeFingerprint(header as unknown as CompatibilityFields) };
}

describe('validateLedger (property)', () => {
  it('accepts every consistent ledger and returns every stage in order, unreached ones pending', () => {
    fc.assert(
      fc.property(shapeArb, (shape) => {
        const { header, files } = build(shape);
        const ledger = validate(header, files);
        expect(ledger.stages.map((s) => s.stage_id)).toEqual(shape.ids);
        ledger.stages.forEach((stage, index) => {
          if (index >= shape.reached) expect(stage).toMatchObject({ status: 'pending', attempts: 0, state: null });
          else expect(stage.state).toEqual({ done: index });
        });
      }),
      { seed: 20261129, numRuns: 300 },
    );
  });

  const mutations: Record<string, (shape: Shape, header: Record<string, unknown>, files: Files) => boolean> = {
    'a stage record removed from the middle': (shape, _h, files) => {
      if (shape.reached < 2) return false;
      files.delete(0);
      return true;
    },
    'a stage record inserted past the last stage': (shape, _h, files) => {
      files.set(shape.ids.length, { ...(files.get(0) ?? {}), index: shape.ids.length });
      return shape.reached > 0;
    },
    'two stage records swapped': (shape, _h, files) => {
      if (shape.reached < 2) return false;
      const [a, b] = [files.get(0), files.get(1)];
      files.set(0, b as Record<string, unknown>);
      files.set(1, a as Record<string, unknown>);
      return true;
    },
    'a stage record bound to another run': (shape, _h, files) => {
      if (shape.reached < 1) return false;
      files.set(0, { ...(files.get(0) as Record<string, unknown>), run_id: OTHER_RUN });
      return true;
    },
    'a stage record for another stage id at its position': (shape, _h, files) => {
      if (shape.reached < 1) return false;
      files.set(0, { ...(files.get(0) as Record<string, unknown>), stage_id: 'zzz-substituted' });
      return true;
    },
    'a header stage list reordered (fingerprint left alone)': (shape, header) => {
      if (shape.ids.length < 2) return false;
      header['stage_ids'] = [...shape.ids].reverse();
      return true;
    },
    'a header stage id duplicated (fingerprint recomputed)': (shape, header) => {
      const ids = [...shape.ids, shape.ids[0] as string];
      Object.assign(header, refit({ ...header, stage_ids: ids }));
      return true;
    },
    'a stage that started before its predecessor finished': (shape, _h, files) => {
      if (shape.reached < 2) return false;
      const first = files.get(0) as Record<string, unknown>;
      files.set(1, { ...(files.get(1) as Record<string, unknown>), started_at: at(11) });
      return first['finished_at'] !== null;
    },
    'a stage that finished before it started': (shape, _h, files) => {
      if (shape.reached < 1 || (shape.reached === 1 && shape.frontier === 'running')) return false;
      files.set(0, { ...(files.get(0) as Record<string, unknown>), finished_at: at(1) });
      return true;
    },
    'an exception message stored in a failed stage': (shape, _h, files) => {
      if (shape.reached < 1 || shape.frontier !== 'failed') return false;
      const last = files.get(shape.reached - 1) as Record<string, unknown>;
      files.set(shape.reached - 1, { ...last, error: { ...INTERNAL_STAGE_ERROR, message: 'password=hunter2' } });
      return true;
    },
    'an error on a succeeded stage': (shape, _h, files) => {
      if (shape.reached < 2) return false;
      files.set(0, { ...(files.get(0) as Record<string, unknown>), error: { ...INTERNAL_STAGE_ERROR } });
      return true;
    },
    'a state outside canonical JSON': (shape, _h, files) => {
      if (shape.reached < 1) return false;
      files.set(0, { ...(files.get(0) as Record<string, unknown>), state: { ratio: 0.5 } });
      return true;
    },
    'a succeeded header with an unfinished stage': (shape, header) => {
      if (shape.reached === shape.ids.length && shape.frontier === 'succeeded') return false; // that one is consistent
      Object.assign(header, { status: 'succeeded', finished_at: at(100_000) });
      return true;
    },
    'a timestamp that is not UTC': (_shape, header) => {
      header['created_at'] = '2026-11-29T11:00:00.005+01:00';
      return true;
    },
  };

  for (const [what, mutate] of Object.entries(mutations)) {
    it(`rejects ${what} as corrupt_checkpoint`, async () => {
      const cases: { header: Record<string, unknown>; files: Files }[] = [];
      fc.assert(
        fc.property(shapeArb, (shape) => {
          const { header, files } = build(shape);
          if (mutate(shape, header, files)) cases.push({ header, files });
        }),
        { seed: 4242, numRuns: 200 },
      );
      expect(cases.length).toBeGreaterThan(10);
      for (const { header, files } of cases) expect(await codeOf(() => validate(header, files))).toBe('corrupt_checkpoint');
    });
  }
});

describe('validateLedger (header)', () => {
  const shape: Shape = { ids: ['a', 'b', 'c'], reached: 2, frontier: 'running', finished: false };

  it.each(['schema_version', 'workspace_identity_sha256', 'job_type', 'dry_run', 'spec_version', 'input_sha256', 'stage_ids'] as const)(
    'rejects a tampered %s whose stored fingerprint was not recomputed',
    async (field) => {
      const { header, files } = build(shape);
      const tampered: Record<string, unknown> = {
        schema_version: 2,
        workspace_identity_sha256: sha256Hex('other'),
        job_type: 'other',
        dry_run: true,
        spec_version: 2,
        input_sha256: sha256Hex('[]'),
        stage_ids: ['a', 'b', 'd'],
      };
      expect(await codeOf(() => validate({ ...header, [field]: tampered[field] }, files))).toBe('corrupt_checkpoint');
    },
  );

  it('rejects a stored fingerprint that is not the recomputation of its fields', async () => {
    const { header, files } = build(shape);
    expect(await codeOf(() => validate({ ...header, fingerprint: sha256Hex('forged') }, files))).toBe('corrupt_checkpoint');
  });

  it('rejects a header bound to another run directory', async () => {
    const { header, files } = build(shape);
    expect(await codeOf(() => validateLedger(header, OTHER_RUN, files))).toBe('corrupt_checkpoint');
  });

  it('rejects lineage ids that do not fit together', async () => {
    const { header, files } = build(shape);
    expect(await codeOf(() => validate({ ...header, job_id: OTHER_RUN }, files))).toBe('corrupt_checkpoint');
    expect(await codeOf(() => validate({ ...header, resumed_from: RUN }, files))).toBe('corrupt_checkpoint');
  });

  it('accepts a declared stage failure code with the fixed message, and nothing else in its place', async () => {
    const failed: Shape = { ids: ['a', 'b'], reached: 2, frontier: 'failed', finished: true };
    const { header, files } = build(failed);
    const declared = { category: 'stage', code: 'budget_exceeded', message: 'stage reported failure' };
    files.set(1, { ...(files.get(1) as Record<string, unknown>), error: declared });
    expect(validate(header, files).stages[1]?.error).toEqual(declared);
    files.set(1, { ...(files.get(1) as Record<string, unknown>), error: { ...declared, code: 'Budget Exceeded' } });
    expect(await codeOf(() => validate(header, files))).toBe('corrupt_checkpoint');
    files.set(1, { ...(files.get(1) as Record<string, unknown>), error: { ...declared, name: 'TypeError' } });
    expect(await codeOf(() => validate(header, files))).toBe('corrupt_checkpoint');
  });
});
