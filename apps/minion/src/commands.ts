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
  /** Whole seconds as typed; anything else is refused by the fragment as `invalid_schedule`. */
  clientReceiptsInterval?: string;
  clientReceiptsSplay?: string;
}

/** Only plain decimal digits count as seconds: "1e3", "0x10", " 60" and "60.0" are refused, not coerced. */
const seconds = (value: string): number => (/^[0-9]{1,7}$/.test(value) ? Number(value) : Number.NaN);

export function cloudInitCommand(args: CloudInitArgs): string {
  return renderCloudInit({
    minionId: args.minionId,
    masterHost: args.master,
    ...(args.extmods === undefined ? {} : { extmodsDir: args.extmods }),
    ...(args.clientReceiptsInterval === undefined ? {} : { clientReceiptsIntervalSeconds: seconds(args.clientReceiptsInterval) }),
    ...(args.clientReceiptsSplay === undefined ? {} : { clientReceiptsSplaySeconds: seconds(args.clientReceiptsSplay) }),
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
