import type { z } from 'zod';
import { ProtocolError, type ProtocolErrorCode } from './errors.js';

/**
 * Turns a zod failure into a ProtocolError that names only a field of ours.
 * zod issues carry the input (and unknown keys by name), which may hold
 * secrets, so neither the issue messages nor the error itself are passed on.
 */
export function schemaFailure(code: ProtocolErrorCode, subject: string, error: z.ZodError): ProtocolError {
  const issue = error.issues[0];
  if (issue === undefined) return new ProtocolError(code, `${subject} is invalid`);
  if (issue.code === 'unrecognized_keys') return new ProtocolError(code, `${subject} has fields outside the protocol`);
  if (issue.path.length === 0) return new ProtocolError(code, `${subject} must be an object`);
  return new ProtocolError(code, `${subject} field "${issue.path.map(String).join('.')}" is missing or invalid`);
}
