import { MasterRunnerError, readPrivateFile } from '@oduflow/master-runner';
import { isMinionId, isSha256Hex } from '@oduflow/protocol';
import { createHash, timingSafeEqual } from 'node:crypto';
import { z } from 'zod';

/*
 * Who may call the service: the tokens file (private, 0600, owned by the
 * service user). It lists tenants with the minion ids each owns (a target
 * belongs to at most one tenant) and bearer tokens, each stored as the
 * SHA-256 of the raw token with its tenant, actor and scopes. The raw token
 * is never stored, logged or compared as text: a presented token is hashed
 * and compared with every entry in constant time.
 *
 *   {"tenants": {"acme": {"minions": ["client-…"]}},
 *    "tokens": [{"id": "acme-ci", "sha256": "<64 hex>", "tenant": "acme",
 *                "actor": "ci", "scopes": ["read", "dispatch"]}]}
 */

export const SCOPES = ['read', 'dispatch', 'dispatch:custom', 'reconcile'] as const;
export type Scope = (typeof SCOPES)[number];

const MAX_TOKENS_FILE_BYTES = 4 * 1024 * 1024;
const NAME = /^[a-z0-9][a-z0-9._-]{0,63}$/;
const TOKEN_ID = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;
/** The actor ends up in reconciliations: master-runner's reconcile accepts exactly these user names. */
const ACTOR = /^[A-Za-z0-9][A-Za-z0-9._@+-]{0,127}$/;
/** RFC 6750 b64token, bounded. */
const BEARER = /^Bearer +([A-Za-z0-9\-._~+/]{1,512}=*) *$/i;

export const isTenantName = (value: string): boolean => NAME.test(value);
export const isTokenId = (value: string): boolean => TOKEN_ID.test(value);
export const isActorName = (value: string): boolean => ACTOR.test(value);

const TokensFileSchema = z.strictObject({
  tenants: z.record(z.string().regex(NAME), z.strictObject({ minions: z.array(z.string().refine(isMinionId)) })),
  tokens: z.array(
    z.strictObject({
      id: z.string().regex(TOKEN_ID),
      sha256: z.string().refine(isSha256Hex),
      tenant: z.string().regex(NAME),
      actor: z.string().regex(ACTOR),
      scopes: z.array(z.enum(SCOPES)).min(1),
    }),
  ),
});

export interface Principal {
  readonly tokenId: string;
  readonly tenant: string;
  readonly actor: string;
  readonly scopes: ReadonlySet<Scope>;
}

export interface TokenRegistry {
  /** The token's principal, or undefined for a missing, malformed or unknown token. */
  authenticate(authorization: string | undefined): Principal | undefined;
  /** The tenant that owns this target, if any. */
  ownerOf(minionId: string): string | undefined;
  /** The targets a tenant owns. */
  minionsOf(tenant: string): readonly string[];
  readonly tokenCount: number;
}

interface Entry {
  readonly digest: Buffer;
  readonly principal: Principal;
}

function invalid(path: string, what: string): MasterRunnerError {
  return new MasterRunnerError('config_invalid', `tokens file ${path}: ${what}`);
}

/** Where a schema issue is, as a path of names and indexes: never the offending value. */
function issueWhere(issue: z.core.$ZodIssue): string {
  return issue.path.length === 0 ? 'the top level' : issue.path.map(String).join('.');
}

/** Checks a parsed tokens file and builds its registry (pure, for tests and the loader). */
export function tokenRegistry(value: unknown, path: string): TokenRegistry {
  const parsed = TokensFileSchema.safeParse(value);
  if (!parsed.success) {
    const first = parsed.error.issues[0];
    throw invalid(path, first === undefined ? 'invalid' : `invalid at ${issueWhere(first)} (${first.code})`);
  }
  const file = parsed.data;
  const owners = new Map<string, string>();
  const minions = new Map<string, readonly string[]>();
  for (const [tenant, { minions: ids }] of Object.entries(file.tenants)) {
    for (const id of ids) {
      const other = owners.get(id);
      if (other !== undefined && other !== tenant) throw invalid(path, `target ${id} is listed under tenants ${other} and ${tenant}; a target belongs to one tenant`);
      owners.set(id, tenant);
    }
    minions.set(tenant, [...new Set(ids)].sort());
  }
  const ids = new Set<string>();
  const digests = new Set<string>();
  const entries: Entry[] = [];
  for (const [index, token] of file.tokens.entries()) {
    if (ids.has(token.id)) throw invalid(path, `token id ${token.id} is listed twice`);
    if (digests.has(token.sha256)) throw invalid(path, `tokens.${index} has the same sha256 as another token`);
    if (!minions.has(token.tenant)) throw invalid(path, `token ${token.id} names tenant ${token.tenant}, which is not under "tenants"`);
    ids.add(token.id);
    digests.add(token.sha256);
    entries.push({
      digest: Buffer.from(token.sha256, 'hex'),
      principal: { tokenId: token.id, tenant: token.tenant, actor: token.actor, scopes: new Set(token.scopes) },
    });
  }
  return {
    authenticate(authorization) {
      if (authorization === undefined) return undefined;
      const match = BEARER.exec(authorization);
      if (match === null) return undefined;
      const presented = createHash('sha256').update(match[1] as string, 'utf8').digest();
      // Every entry is compared, so the time taken does not depend on which one (if any) matches.
      let found: Principal | undefined;
      for (const entry of entries) {
        if (timingSafeEqual(presented, entry.digest) && found === undefined) found = entry.principal;
      }
      return found;
    },
    ownerOf: (minionId) => owners.get(minionId),
    minionsOf: (tenant) => minions.get(tenant) ?? [],
    tokenCount: entries.length,
  };
}

export function loadTokensFile(path: string): TokenRegistry {
  const text = readPrivateFile(path, 'tokens file', MAX_TOKENS_FILE_BYTES);
  let value: unknown;
  try {
    value = JSON.parse(text) as unknown;
  } catch {
    throw invalid(path, 'is not JSON');
  }
  return tokenRegistry(value, path);
}

/** The SHA-256 of a raw token, as the tokens file holds it. */
export function tokenDigest(token: string): string {
  return createHash('sha256').update(token, 'utf8').digest('hex');
}
