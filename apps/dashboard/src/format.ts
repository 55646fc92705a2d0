/** An instant as operators read it across time zones: UTC, to the second. */
export function instant(iso: string | null | undefined): string {
  if (iso === null || iso === undefined) return 'not recorded';
  const date = new Date(iso);
  if (Number.isNaN(date.getTime())) return iso;
  return `${date.toISOString().slice(0, 19).replace('T', ' ')} UTC`;
}

export function duration(ms: number | null): string {
  if (ms === null) return '—';
  if (ms < 1_000) return `${ms} ms`;
  const s = Math.round(ms / 100) / 10;
  return s < 120 ? `${s} s` : `${Math.round(s / 6) / 10} min`;
}

export function plural(n: number, one: string, many = `${one}s`): string {
  return `${n} ${n === 1 ? one : many}`;
}
