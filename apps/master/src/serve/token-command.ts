import { MasterRunnerError } from '@oduflow/master-runner';
import { randomBytes } from 'node:crypto';
import { SCOPES, isActorName, isTenantName, isTokenId, tokenDigest, type Scope } from './tokens.js';

/*
 * `oduflow-master token new`: a fresh random bearer token, printed once,
 * and the tokens-file entry that admits it (its SHA-256, never the token).
 * Nothing is written: the operator pastes the entry into the tokens file
 * and sends SIGHUP to the service (or restarts it).
 */

export interface TokenNewFlags {
  readonly tenant: string;
  readonly actor: string;
  readonly scope: readonly string[];
  readonly id?: string;
}

/** 32 random bytes, base64url: a bearer token of 256 bits, with a prefix that secret scanners can match. */
function newToken(): string {
  return `odf_${randomBytes(32).toString('base64url')}`;
}

export interface NewTokenEntry {
  readonly id: string;
  readonly sha256: string;
  readonly tenant: string;
  readonly actor: string;
  readonly scopes: readonly Scope[];
}

export function tokenNewCommand(flags: TokenNewFlags): { readonly token: string; readonly entry: NewTokenEntry } {
  if (!isTenantName(flags.tenant)) throw new MasterRunnerError('invalid_input', 'a tenant name is 1-64 of a-z 0-9 . _ - (starting with a letter or digit)');
  if (!isActorName(flags.actor)) throw new MasterRunnerError('invalid_input', 'the actor must be a user name (letters, digits, . _ @ + -)', { detail: 'invalid_actor' });
  const scopes = [...new Set(flags.scope)];
  const unknown = scopes.filter((s) => !(SCOPES as readonly string[]).includes(s));
  if (scopes.length === 0 || unknown.length > 0) throw new MasterRunnerError('invalid_input', `scopes are ${SCOPES.join(', ')}`);
  const id = flags.id ?? `${flags.tenant}-${flags.actor.replace(/[^A-Za-z0-9._-]/g, '-')}-${randomBytes(3).toString('hex')}`;
  if (!isTokenId(id)) throw new MasterRunnerError('invalid_input', 'a token id is 1-64 of A-Z a-z 0-9 . _ - (starting with a letter or digit)');
  const token = newToken();
  return { token, entry: { id, sha256: tokenDigest(token), tenant: flags.tenant, actor: flags.actor, scopes: scopes as Scope[] } };
}

/** For people: the token, the entry to paste, and what to do with them. */
export function tokenNewText(result: { readonly token: string; readonly entry: NewTokenEntry }): string {
  return (
    `token: ${result.token}\n` +
    `  (shown once: keep it in a secret store; the service keeps only its SHA-256)\n` +
    `entry for "tokens" in the tokens file (then send SIGHUP to serve, or restart it):\n` +
    `${JSON.stringify(result.entry)}\n`
  );
}
