/** A JSON object (not null, not an array): what every answer and record is read as before its fields are. */
export function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
