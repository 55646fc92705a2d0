import { ProtocolError } from '../src/errors.js';

/** The ProtocolError code `fn` throws, or undefined if it returns; any other error propagates. */
export function codeOf(fn: () => unknown): string | undefined {
  try {
    fn();
  } catch (error) {
    if (ProtocolError.isInstance(error)) return error.code;
    throw error;
  }
  return undefined;
}
