import type { z } from 'zod';
import { JobEnvelopeError, type JobEnvelopeErrorCode } from './errors.js';

/** Field names of our own schemas; a path segment outside this vocabulary may be data (a record key) and is never printed. */
const OWN_FIELD = /^[a-z][a-z0-9_]{0,31}$/;

/** The first segment is a field of our schema; deeper string segments may be keys of caller data and show as `*`. */
function safeSegment(segment: PropertyKey, position: number): string {
  if (typeof segment === 'number') return String(segment);
  if (position === 0 && typeof segment === 'string' && OWN_FIELD.test(segment)) return segment;
  return '*';
}

/**
 * Turns a zod failure into a JobEnvelopeError that names at most a field of
 * ours. zod issues carry the input (and unknown keys by name), which may be
 * stage state or credentials, so neither the issues nor their messages are
 * passed on. At most three path segments are shown.
 */
export function schemaFailure(code: JobEnvelopeErrorCode, subject: string, error: z.ZodError): JobEnvelopeError {
  const issue = error.issues[0];
  if (issue === undefined) return new JobEnvelopeError(code, `${subject} is invalid`);
  if (issue.code === 'unrecognized_keys') return new JobEnvelopeError(code, `${subject} has fields outside its schema`);
  if (issue.path.length === 0) return new JobEnvelopeError(code, `${subject} is not an object of the expected shape`);
  const field = issue.path.slice(0, 3).map(safeSegment).join('.');
  return new JobEnvelopeError(code, `${subject}: field "${field}" is missing or invalid`);
}
