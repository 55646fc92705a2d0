/**
 * The value a salt-api body or event holds, or undefined when it is not JSON.
 * Callers check the shape field by field; nothing of the text is echoed.
 */
export function parseJsonText(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return undefined;
  }
}
