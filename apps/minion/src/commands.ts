import {
  renderCloudInit,
  verifyInstalledModule,
  writeSaltFileTree,
  type SaltFileTree,
  type VerifyResult,
} from '@oduflow/minion-wrapper';

/**
 * Exit codes of `oduflow-minion`: one table (CONVENTIONS: codes map to exits in one place).
 * 2 means refused: bad input (usage, minion id, host, path) or a failed verification.
 */
export const EXIT = Object.freeze({ ok: 0, internal: 1, refused: 2 });

/** The `--json` error document, printed on stdout: `{"error":{"code","message"}}`. */
export function jsonError(code: string, message: string): string {
  return `${JSON.stringify({ error: { code, message } })}\n`;
}

export interface CloudInitArgs {
  minionId: string;
  master: string;
  extmods?: string;
}

export function cloudInitCommand(args: CloudInitArgs): string {
  return renderCloudInit({
    minionId: args.minionId,
    masterHost: args.master,
    ...(args.extmods === undefined ? {} : { extmodsDir: args.extmods }),
  });
}

export function fileTreeCommand(out: string): SaltFileTree {
  return writeSaltFileTree(out);
}

export function verifyCommand(extmods: string): VerifyResult {
  return verifyInstalledModule(extmods);
}

export function formatTable(rows: ReadonlyArray<readonly [string, string]>): string {
  const width = Math.max(...rows.map(([key]) => key.length));
  return rows.map(([key, value]) => `${key.padEnd(width)}  ${value}`).join('\n') + '\n';
}
