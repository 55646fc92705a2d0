import Table from 'cli-table3';

/*
 * Every command ends in one Report: rows of flat fields. People get a table,
 * programs get the same fields as JSON (--json). Output goes to stdout; logs
 * go to stderr, so `--json | jq` always sees clean JSON.
 */

type Cell = string | number | boolean | null;
export type Row = Readonly<Record<string, Cell>>;

export interface Report {
  /** A headline for people (omitted in JSON, where `outcome` carries it). */
  readonly title?: string;
  /** Fields about the whole command (outcome, reason...). */
  readonly summary?: Row;
  /** One row per record; shown as columns. */
  readonly rows?: readonly Row[];
  /** One record shown field by field. */
  readonly detail?: Row;
  /** A request's history (show): one row per entry, and how many entries the cap let go. */
  readonly history?: { readonly entries: readonly Row[]; readonly dropped: number };
  /** A document of its own (a rollout report): what --json prints, as is, instead of the fields above. */
  readonly document?: unknown;
}

function text(cell: Cell | undefined): string {
  return cell === null || cell === undefined ? '-' : String(cell);
}

function columns(rows: readonly Row[]): string {
  const head = Object.keys(rows[0] ?? {});
  const table = new Table({ head, style: { head: [], border: [] } });
  for (const row of rows) table.push(head.map((k) => text(row[k])));
  return table.toString();
}

function historyTable(history: NonNullable<Report['history']>): string {
  if (history.entries.length === 0) return 'history: not kept (the record predates request histories)';
  const dropped = history.dropped === 0 ? '' : ` (${history.dropped} entries between the first and the last ones were let go)`;
  return `history${dropped}:\n${columns(history.entries)}`;
}

function verticalTable(row: Row): string {
  const table = new Table({ style: { head: [], border: [] } });
  for (const [key, value] of Object.entries(row)) table.push({ [key]: text(value) });
  return table.toString();
}

export function renderTable(report: Report): string {
  const parts: string[] = [];
  if (report.title !== undefined) parts.push(report.title);
  if (report.summary !== undefined) parts.push(verticalTable(report.summary));
  if (report.detail !== undefined) parts.push(verticalTable(report.detail));
  if (report.history !== undefined) parts.push(historyTable(report.history));
  if (report.rows !== undefined) parts.push(report.rows.length === 0 ? '(no records)' : columns(report.rows));
  return `${parts.join('\n')}\n`;
}

export function renderJson(report: Report): string {
  if (report.document !== undefined) return `${JSON.stringify(report.document)}\n`;
  const body: Record<string, unknown> = { ...(report.summary ?? {}) };
  if (report.detail !== undefined) body['record'] = report.detail;
  if (report.history !== undefined) body['history'] = { kept: report.history.entries.length > 0, entries: report.history.entries, dropped: report.history.dropped };
  if (report.rows !== undefined) body['records'] = report.rows;
  return `${JSON.stringify(body)}\n`;
}
