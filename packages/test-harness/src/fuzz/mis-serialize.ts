/*
 * A JSON serializer that writes the canonical form (DESIGN §3) except for one
 * deliberate deviation at one chosen node: the texts a lax or non-canonical
 * producer would send. Every deviation is either invalid JSON or valid JSON
 * that is not byte-equal to the canonical form, except where the chosen node
 * cannot take it (then the text stays canonical, which is a case too).
 */

export const DEVIATIONS = [
  'none',
  // objects
  'keys_reversed',
  'keys_by_code_point',
  'member_duplicated',
  'member_duplicated_other_value',
  'space_after_colon',
  'trailing_comma',
  // objects and arrays
  'space_after_comma',
  'newline_inside',
  // strings
  'char_escaped',
  'char_escaped_uppercase',
  'solidus_escaped',
  'short_escape_long',
  'control_raw',
  'lone_surrogate_escape',
  // numbers
  'number_dot_zero',
  'number_exponent',
  'number_leading_zero',
  'number_plus',
  'number_minus_zero',
  'number_fraction',
  // any node
  'space_before',
] as const;
type Deviation = (typeof DEVIATIONS)[number];

export interface Plan {
  readonly deviation: Deviation;
  /** Which node (in pre-order) takes the deviation; wraps around the node count. */
  readonly node: number;
  /** Which character, member or digit inside the node, where it matters. */
  readonly detail: number;
}

const OBJECT_ONLY: ReadonlySet<Deviation> = new Set(['keys_reversed', 'keys_by_code_point', 'member_duplicated', 'member_duplicated_other_value', 'space_after_colon', 'trailing_comma']);
const CONTAINER: ReadonlySet<Deviation> = new Set(['space_after_comma', 'newline_inside']);
const STRING_ONLY: ReadonlySet<Deviation> = new Set(['char_escaped', 'char_escaped_uppercase', 'solidus_escaped', 'short_escape_long', 'control_raw', 'lone_surrogate_escape']);

function fits(deviation: Deviation, value: unknown): boolean {
  if (deviation === 'none') return false;
  if (deviation === 'space_before') return true;
  if (OBJECT_ONLY.has(deviation)) return isObject(value);
  if (CONTAINER.has(deviation)) return isObject(value) || Array.isArray(value);
  if (STRING_ONLY.has(deviation)) return typeof value === 'string';
  return typeof value === 'number';
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** UTF-16 code unit order: what canonical JSON sorts keys by. */
function byCodeUnit(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/** Code point order: what a naive port (Python `sorted(keys)`) would use. */
function byCodePoint(a: string, b: string): number {
  const x = Array.from(a, (c) => c.codePointAt(0) as number);
  const y = Array.from(b, (c) => c.codePointAt(0) as number);
  for (let i = 0; i < Math.min(x.length, y.length); i += 1) {
    if (x[i] !== y[i]) return (x[i] as number) - (y[i] as number);
  }
  return x.length - y.length;
}

const hex4 = (unit: number) => unit.toString(16).padStart(4, '0');

function stringText(text: string, deviation: Deviation | undefined, detail: number): string {
  const canonical = JSON.stringify(text);
  if (deviation === undefined) return canonical;
  const at = text.length === 0 ? 0 : detail % text.length;
  const unit = text.charCodeAt(at);
  const body = (units: string) => `"${JSON.stringify(text.slice(0, at)).slice(1, -1)}${units}${JSON.stringify(text.slice(at + 1)).slice(1, -1)}"`;
  switch (deviation) {
    case 'char_escaped':
      return text.length === 0 ? '"\\u0061"' : body(`\\u${hex4(unit)}`);
    case 'char_escaped_uppercase':
      return text.length === 0 ? '"\\u001F"' : body(`\\u${hex4(unit).toUpperCase()}`);
    case 'solidus_escaped':
      return `"\\/${canonical.slice(1)}`;
    case 'short_escape_long':
      return `"\\u000a${canonical.slice(1)}`;
    case 'control_raw':
      return `"\u0001${canonical.slice(1)}`;
    case 'lone_surrogate_escape':
      return `"\\ud800${canonical.slice(1)}`;
    default:
      return canonical;
  }
}

const EXPONENTS = ['e0', 'E0', 'e+0', 'e-0', 'E+00'] as const;

function numberText(value: number, deviation: Deviation | undefined, detail: number): string {
  const canonical = String(value);
  switch (deviation) {
    case 'number_dot_zero':
      return `${canonical}.0`;
    case 'number_exponent':
      return canonical + (EXPONENTS[detail % EXPONENTS.length] as string);
    case 'number_leading_zero':
      return value < 0 ? `-0${canonical.slice(1)}` : `0${canonical}`;
    case 'number_plus':
      return `+${canonical}`;
    case 'number_minus_zero':
      return '-0';
    case 'number_fraction':
      return `${canonical}.5`;
    default:
      return canonical;
  }
}

/**
 * Writes `value` canonically, except that the node numbered `target` (in
 * the order the canonical text writes nodes) takes `plan.deviation`. Every
 * node is reported to `visit` in that order.
 */
function emitWith(value: unknown, plan: Plan, target: number, visit: (node: unknown) => void): string {
  let counter = 0;
  const canonical = (v: unknown) => emitWith(v, plan, -1, () => undefined);
  const emit = (v: unknown): string => {
    visit(v);
    const deviation = counter === target ? plan.deviation : undefined;
    counter += 1;
    const prefix = deviation === 'space_before' ? ' ' : '';
    if (v === null || typeof v === 'boolean') return prefix + String(v);
    if (typeof v === 'number') return prefix + numberText(v, deviation, plan.detail);
    if (typeof v === 'string') return prefix + stringText(v, deviation, plan.detail);
    const comma = deviation === 'space_after_comma' ? ', ' : ',';
    const open = deviation === 'newline_inside' ? '\n' : '';
    const trailing = deviation === 'trailing_comma' ? ',' : '';
    if (Array.isArray(v)) return `${prefix}[${open}${v.map(emit).join(comma)}${trailing}]`;
    const object = v as Record<string, unknown>;
    let keys = Object.keys(object).sort(deviation === 'keys_by_code_point' ? byCodePoint : byCodeUnit);
    if (deviation === 'keys_reversed') keys = keys.reverse();
    const colon = deviation === 'space_after_colon' ? ': ' : ':';
    const members = keys.map((key) => `${JSON.stringify(key)}${colon}${emit(object[key])}`);
    const first = keys[0];
    if (first !== undefined && (deviation === 'member_duplicated' || deviation === 'member_duplicated_other_value')) {
      // The duplicate comes last, so a last-wins parser keeps a value that may differ from the first.
      const again = deviation === 'member_duplicated' ? canonical(object[first]) : '0';
      members.push(`${JSON.stringify(first)}${colon}${again}`);
    }
    return `${prefix}{${open}${members.join(comma)}${trailing}}`;
  };
  return emit(value);
}

/** Serializes `value` (plain JSON data) canonically but for `plan`. */
export function misSerialize(value: unknown, plan: Plan): string {
  const nodes: unknown[] = [];
  const canonical = emitWith(value, plan, -1, (node) => nodes.push(node));
  // The first node at or after the chosen one that can take the deviation.
  for (let k = 0; k < nodes.length; k += 1) {
    const i = (plan.node + k) % nodes.length;
    if (fits(plan.deviation, nodes[i])) return emitWith(value, plan, i, () => undefined);
  }
  return canonical;
}
