import { MasterRunnerError, type RolloutSpec } from '@oduflow/master-runner';
import { PROFILES, canonicalJson, isMinionId, isRequestId, isSha256Hex } from '@oduflow/protocol';
import { ReceiptStoreError, openPrivateDir, type FileLock, type PrivateDir } from '@oduflow/receipt-store';
import { createHash } from 'node:crypto';
import { join } from 'node:path';
import { z } from 'zod';

/*
 * Where the service keeps the rollouts it was asked for over HTTP, inside
 * the rollout workspace (the CLI's, by default), beside the CLI's own runs:
 *
 *   <workspace>/http/<tenant>/<rollout id>/   0700: one rollout, named by its key-derived id
 *     binding.json        0600: the tenant and actor that asked, when, and the canonical input
 *                         (profile, state digest, batch size, budget, mode, target count) with its SHA-256
 *     targets.json        0600: the canonical target list (the input the envelope keeps only as a digest)
 *     state-data.json     0600: custom rollouts only, the high data, kept only until the rollout ends
 *                         (like the outbox keeps a request's until its publication), so a restart can resume it
 *     start.lock          flock held while the rollout is being started (a second POST with its key: 409)
 *     job/                its job-envelope workspace (locks/, runs/): `oduflow-master rollout show
 *                         <run-id> --workspace <that dir>` reads it too
 *
 * A tenant's rollouts live under its own directory, so a rollout of another
 * tenant is not even looked up. Every directory and file goes through
 * receipt-store: private, no-follow, atomic fsynced writes.
 */

const HTTP_DIR = 'http';
const BINDING_FILE = 'binding.json';
const TARGETS_FILE = 'targets.json';
const STATE_DATA_FILE = 'state-data.json';
const START_LOCK = 'start.lock';
const JOB_DIR = 'job';

const Count = z.number().int().min(0).max(Number.MAX_SAFE_INTEGER);

const BindingSchema = z.strictObject({
  schema_version: z.literal(1),
  rollout_id: z.string().refine(isRequestId),
  tenant: z.string(),
  actor: z.string(),
  created_at: z.iso.datetime(),
  profile: z.enum(PROFILES),
  state_digest: z.string(),
  batch_size: Count,
  max_unresolved: Count,
  dry_run: z.boolean(),
  target_count: Count,
  /** SHA-256 of the canonical input: what "the same body" means for a replay. */
  input_sha256: z.string().refine(isSha256Hex),
});
export type Binding = z.infer<typeof BindingSchema>;

const TargetsSchema = z.strictObject({ targets: z.array(z.string().refine(isMinionId)).min(1) });
const StateDataSchema = z.strictObject({ state_data_json: z.string() });

/** The canonical input of a rollout, hashed: the same profile, target set, batch size, budget, mode and state data digest. */
export function inputSha256(spec: RolloutSpec): string {
  const input = {
    profile: spec.profile,
    state_digest: spec.stateDigest,
    targets: [...spec.targets],
    batch_size: spec.batchSize,
    max_unresolved: spec.maxUnresolved,
    dry_run: spec.dryRun,
  };
  return createHash('sha256').update(canonicalJson(input), 'utf8').digest('hex');
}

function storeFailure(error: unknown, what: string): MasterRunnerError {
  const code = ReceiptStoreError.isInstance(error) ? error.code : 'io_error';
  const runner = code === 'unsafe_path' ? 'rollout_refused' : 'rollout_io';
  return new MasterRunnerError(runner, `the rollout workspace could not ${what} (${code})`, { detail: code === 'unsafe_path' ? 'unsafe_workspace' : 'io_error', cause: error });
}

function guarded<T>(what: string, action: () => T): T {
  try {
    return action();
  } catch (error) {
    if (MasterRunnerError.isInstance(error)) throw error;
    throw storeFailure(error, what);
  }
}

function isNotFound(error: unknown): boolean {
  return ReceiptStoreError.isInstance(error) && error.code === 'not_found';
}

/** One rollout's directory, open. */
export class RolloutDir {
  readonly id: string;
  readonly #dir: PrivateDir;

  constructor(id: string, dir: PrivateDir) {
    this.id = id;
    this.#dir = dir;
  }

  /** The job-envelope workspace of this rollout (an absolute path, for startRollout and readRollout). */
  get jobWorkspace(): string {
    return join(this.#dir.path, JOB_DIR);
  }

  /** One non-blocking try: held while the rollout is being started; undefined when another start holds it. */
  tryStartLock(): FileLock | undefined {
    return guarded('take a rollout start lock', () => this.#dir.tryLockSync(START_LOCK));
  }

  binding(): Binding | undefined {
    const raw = guarded('read a rollout binding', () => this.#dir.readJsonIfExists(BINDING_FILE));
    if (raw === undefined) return undefined;
    const parsed = BindingSchema.safeParse(raw);
    if (!parsed.success || parsed.data.rollout_id !== this.id) {
      throw new MasterRunnerError('rollout_refused', `the binding of rollout ${this.id} is not one this service writes`, { detail: 'corrupt_checkpoint' });
    }
    return parsed.data;
  }

  targets(): string[] {
    const parsed = TargetsSchema.safeParse(guarded('read a rollout target list', () => this.#dir.readJson(TARGETS_FILE)));
    if (!parsed.success) throw new MasterRunnerError('rollout_refused', `the target list of rollout ${this.id} is not one this service writes`, { detail: 'corrupt_checkpoint' });
    return parsed.data.targets;
  }

  stateData(): string | undefined {
    const raw = guarded('read a rollout’s state data', () => this.#dir.readJsonIfExists(STATE_DATA_FILE));
    if (raw === undefined) return undefined;
    const parsed = StateDataSchema.safeParse(raw);
    if (!parsed.success) throw new MasterRunnerError('rollout_refused', `the state data of rollout ${this.id} is not one this service writes`, { detail: 'corrupt_checkpoint' });
    return parsed.data.state_data_json;
  }

  /**
   * Binds the rollout before it starts: the target list and state data first,
   * the binding last (its presence says the others are complete). Replaces
   * what a start that never reached its first checkpoint left.
   */
  bind(binding: Binding, targets: readonly string[], stateDataJson: string | undefined): void {
    guarded('write a rollout binding', () => {
      this.#dir.writeJsonAtomic(TARGETS_FILE, { targets }, { replace: true });
      if (stateDataJson !== undefined) this.#dir.writeJsonAtomic(STATE_DATA_FILE, { state_data_json: stateDataJson }, { replace: true });
      this.#dir.writeJsonAtomic(BINDING_FILE, binding, { replace: true });
    });
  }

  /** Forgets the state data of a rollout that ended (nothing left to publish). */
  forgetStateData(): boolean {
    return guarded('remove a rollout’s state data', () => {
      try {
        this.#dir.remove(STATE_DATA_FILE);
        return true;
      } catch (error) {
        if (isNotFound(error)) return false;
        throw error;
      }
    });
  }

  close(): void {
    this.#dir.close();
  }
}

/** The service's part of the rollout workspace. */
export class RolloutWorkspace {
  readonly root: string;

  constructor(root: string) {
    this.root = root;
  }

  #http(create: boolean): PrivateDir | undefined {
    return guarded('open the rollout workspace', () => {
      try {
        const root = openPrivateDir(this.root, { create, removeStaleTemps: false });
        try {
          return root.subdir(HTTP_DIR, { create, removeStaleTemps: false });
        } finally {
          root.close();
        }
      } catch (error) {
        if (!create && isNotFound(error)) return undefined;
        throw error;
      }
    });
  }

  /** Opens a tenant's rollout directory (created for a start); undefined when it does not exist. */
  open(tenant: string, id: string, create: boolean): RolloutDir | undefined {
    const http = this.#http(create);
    if (http === undefined) return undefined;
    try {
      return guarded('open a rollout directory', () => {
        try {
          const tenantDir = http.subdir(tenant, { create, removeStaleTemps: false });
          try {
            // A start sweeps what a killed writer left in its own directory; readers never write.
            return new RolloutDir(id, tenantDir.subdir(id, { create, removeStaleTemps: create }));
          } finally {
            tenantDir.close();
          }
        } catch (error) {
          if (!create && isNotFound(error)) return undefined;
          throw error;
        }
      });
    } finally {
      http.close();
    }
  }

  /** A tenant's rollout ids, sorted (code-unit order); none when it has none. */
  idsOf(tenant: string): string[] {
    const http = this.#http(false);
    if (http === undefined) return [];
    try {
      return guarded('list rollouts', () => {
        let tenantDir: PrivateDir;
        try {
          tenantDir = http.subdir(tenant, { removeStaleTemps: false });
        } catch (error) {
          if (isNotFound(error)) return [];
          throw error;
        }
        try {
          return tenantDir.list().filter((name) => isRequestId(name));
        } finally {
          tenantDir.close();
        }
      });
    } finally {
      http.close();
    }
  }

  /** Every tenant that has a rollout directory. */
  tenants(): string[] {
    const http = this.#http(false);
    if (http === undefined) return [];
    try {
      return guarded('list rollouts', () => http.list());
    } finally {
      http.close();
    }
  }
}
