import type { JsonValue } from '@oduflow/protocol';
import { describe, expectTypeOf, it } from 'vitest';
import type { StageContext } from './index.js';

// Checked by `tsc` (npm run typecheck): a stage reads its predecessors' states as plain JSON.
describe('StageContext.earlierState', () => {
  it('takes a stage id and gives back that stage state (or null)', () => {
    expectTypeOf<StageContext['earlierState']>().parameter(0).toEqualTypeOf<string>();
    expectTypeOf<StageContext['earlierState']>().returns.toEqualTypeOf<JsonValue | null>();
  });
});
