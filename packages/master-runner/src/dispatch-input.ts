import { PROFILES, ProtocolError, parseMinionId, parseRequestId, stateDigest, type Profile } from '@oduflow/protocol';
import { MasterRunnerError } from './errors.js';

export interface DispatchInput {
  readonly minionId: string;
  readonly profile: string;
  /** Canonical JSON high data; only with the `custom` profile. */
  readonly stateDataJson?: string;
  /** A caller-chosen request id makes the dispatch idempotent; one is generated otherwise. */
  readonly requestId?: string;
}

export interface ValidDispatch {
  readonly requestId: string;
  readonly minionId: string;
  readonly profile: Profile;
  /** `""` for the fixed roles. Published, never stored. */
  readonly stateDataJson: string;
  readonly stateDigest: string;
}

function invalid(error: unknown): never {
  if (ProtocolError.isInstance(error)) {
    throw new MasterRunnerError('invalid_input', error.message, { detail: error.code, cause: error });
  }
  throw error;
}

/**
 * Validates a dispatch with the protocol's own parsers, in a fixed order
 * (request id, minion id, profile, state data) so the same bad input always
 * names the same code. Nothing is read from or written to the store.
 */
export function validateDispatchInput(input: DispatchInput, newRequestId: () => string): ValidDispatch {
  try {
    const requestId = parseRequestId(input.requestId ?? newRequestId());
    const minionId = parseMinionId(input.minionId);
    if (!(PROFILES as readonly unknown[]).includes(input.profile)) {
      throw new ProtocolError('invalid_profile', `profile must be one of ${PROFILES.join(', ')}`);
    }
    const profile = input.profile as Profile;
    const text = input.stateDataJson ?? '';
    if (profile !== 'custom') {
      if (text !== '') throw new ProtocolError('invalid_high_data', 'state data is accepted only with the custom profile');
      return { requestId, minionId, profile, stateDataJson: '', stateDigest: '' };
    }
    if (text === '') throw new ProtocolError('invalid_high_data', 'the custom profile needs state data');
    return { requestId, minionId, profile, stateDataJson: text, stateDigest: stateDigest(text) };
  } catch (error) {
    return invalid(error);
  }
}
