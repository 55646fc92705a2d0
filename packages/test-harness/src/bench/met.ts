import type { BenchRow } from './result.js';

/**
 * Whether a row meets its target: the median ratio (ratio_*) or the median
 * value (value_*) against the target's bound; undefined when the row has
 * no target. A result may state `met` itself (a rule the median alone does
 * not capture, such as "flat across sizes"); then its word is kept.
 */
export function rowMet(row: BenchRow): boolean | undefined {
  if (row.met !== undefined) return row.met;
  const { target } = row;
  if (target === null) return undefined;
  switch (target.kind) {
    case 'ratio_max':
      return row.ratio !== null && row.ratio.median <= target.value;
    case 'ratio_min':
      return row.ratio !== null && row.ratio.median >= target.value;
    case 'value_max':
      return row.value.median <= target.value;
    case 'value_min':
      return row.value.median >= target.value;
  }
}
