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
  let inString = false;
  for (let index = 0; index < text.length; index += 1) {
    const char = text[index];
    if (inString) {
      if (char === '\\') index += 1;
      else if (char === '"') inString = false;
    } else if (char === '"') inString = true;
    else if (char === '{' || char === '[') {
      depth += 1;
      if (depth > maxDepth) maxDepth = depth;
    } else if (char === '}' || char === ']') depth -= 1;
  }
  return maxDepth;
}
