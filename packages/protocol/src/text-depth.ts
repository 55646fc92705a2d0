/**
 * Maximum bracket nesting of a JSON text, scanned without parsing so that no
 * parser's recursion limit decides anything. Brackets inside string literals
 * do not count; a string ends at the next `"` not escaped by `\`. The
 * top-level container is depth 1. Internal: the same scanner bounds canonical
 * JSON (`MAX_JSON_DEPTH`) and custom high data (`MAX_HIGH_DATA_DEPTH`).
 */
export function textNestingDepth(text: string): number {
  let depth = 0;
  let maxDepth = 0;
  const length = text.length;
  for (let index = 0; index < length; index += 1) {
    const unit = text.charCodeAt(index);
    if (unit === QUOTE) index = stringEnd(text, index + 1);
    else if (unit === OPEN_BRACE || unit === OPEN_BRACKET) {
      depth += 1;
      if (depth > maxDepth) maxDepth = depth;
    } else if (unit === CLOSE_BRACE || unit === CLOSE_BRACKET) depth -= 1;
  }
  return maxDepth;
}

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const OPEN_BRACE = 0x7b;
const CLOSE_BRACE = 0x7d;
const OPEN_BRACKET = 0x5b;
const CLOSE_BRACKET = 0x5d;

/**
 * The index of the `"` that closes the string whose first content unit is at
 * `from`, or the text's length when it never closes. A `"` is escaped exactly
 * when an odd run of `\` precedes it inside the string (each `\` escapes the
 * next unit), so the search jumps from quote to quote instead of walking
 * every unit.
 */
function stringEnd(text: string, from: number): number {
  for (let quote = text.indexOf('"', from); quote !== -1; quote = text.indexOf('"', quote + 1)) {
    let backslashes = 0;
    while (quote - backslashes - 1 >= from && text.charCodeAt(quote - backslashes - 1) === BACKSLASH) backslashes += 1;
    if (backslashes % 2 === 0) return quote;
  }
  return text.length;
}
