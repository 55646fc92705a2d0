import type { BenchResult, BenchRow, LineChart } from './result.js';
import { rowMet } from './met.js';

/*
 * The charts of BENCHMARKS.md, written as SVG text by hand. No charting
 * library: those draw into a DOM (a browser's, or jsdom on the server),
 * while a bar per row with a whisker and a target tick, or a polyline per
 * series, is a dozen SVG elements; by hand the output is also byte-for-byte
 * deterministic (fixed layout, rounded coordinates, no ids, no timestamps),
 * so a regenerated chart only shows in a diff when a number moved.
 */

const WIDTH = 760;
const FONT = 'font-family="sans-serif" font-size="12"';
const COLOR = { met: '#2f7d32', missed: '#c0392b', none: '#7f8c8d', axis: '#333333', grid: '#dddddd', target: '#000000' } as const;
const SERIES_COLORS = ['#1f77b4', '#ff7f0e', '#2ca02c', '#d62728', '#9467bd', '#8c564b'] as const;

/** Text made safe for SVG element content and attribute values. */
export function escapeXml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&apos;' })[c] as string);
}

/** A coordinate rounded to 0.1 px, so the text does not depend on float noise. */
const px = (n: number): string => String(Math.round(n * 10) / 10);

/** A number as a label: at most 3 significant digits, no exponent. */
export function formatNumber(n: number): string {
  if (n === 0) return '0';
  const rounded = Number(n.toPrecision(3));
  return Math.abs(rounded) >= 1e4 ? Math.round(rounded).toLocaleString('en-US') : String(rounded);
}

/** Up to ~5 round tick values from 0 to at least `max`. */
function ticks(max: number): number[] {
  const raw = max / 5;
  const magnitude = 10 ** Math.floor(Math.log10(raw));
  const step = ([1, 2, 2.5, 5, 10].find((m) => m * magnitude >= raw) ?? 10) * magnitude;
  const out: number[] = [];
  for (let t = 0; t <= max + step * 1e-9; t += step) out.push(Math.round(t / step) * step);
  return out;
}

function svgOpen(height: number, title: string): string[] {
  return [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${WIDTH}" height="${px(height)}" viewBox="0 0 ${WIDTH} ${px(height)}" role="img" aria-label="${escapeXml(title)}">`,
    `<title>${escapeXml(title)}</title>`,
    `<rect x="0" y="0" width="${WIDTH}" height="${px(height)}" fill="#ffffff"/>`,
    `<text x="10" y="20" ${FONT} font-weight="bold">${escapeXml(title)}</text>`,
  ];
}

const ratioTargetOf = (row: BenchRow): number | undefined => (row.target?.kind.startsWith('ratio') === true ? row.target.value : undefined);

/** Above this largest ratio the axis is logarithmic (one 70× row would flatten the 1.2× ones). */
const LOG_SCALE_ABOVE = 12;

/** Round logarithmic ticks from `lo` to `hi`: 1, 3, 10, 30, ... times powers of ten. */
function logTicks(lo: number, hi: number): number[] {
  const out: number[] = [];
  for (let p = Math.floor(Math.log10(lo)); p <= Math.ceil(Math.log10(hi)); p += 1) {
    for (const m of [1, 3]) {
      const t = Number((m * 10 ** p).toPrecision(3));
      if (t >= lo * (1 - 1e-9) && t <= hi * (1 + 1e-9)) out.push(t);
    }
  }
  return out;
}

/**
 * Horizontal bars, one per row that has a ratio: the median ratio as the
 * bar, min–max as a whisker, the row's target as a black tick, and a
 * dashed line at 1 (the floor). Green when the target is met, red when
 * missed, grey when the row has none. On a linear axis a bar starts at 0;
 * when a ratio exceeds LOG_SCALE_ABOVE the axis is logarithmic and a bar
 * runs from the floor (1×) to its ratio, leftwards when below it.
 * Undefined when no row has a ratio.
 */
export function ratioBarsSvg(result: BenchResult): string | undefined {
  const rows = result.rows.filter((row): row is BenchRow & { ratio: NonNullable<BenchRow['ratio']> } => row.ratio !== null);
  if (rows.length === 0) return undefined;
  const left = 330;
  const right = WIDTH - 30;
  const top = 40;
  const rowHeight = 26;
  const height = top + rows.length * rowHeight + 50;
  const highest = Math.max(1, ...rows.map((row) => row.ratio.max), ...rows.map((row) => ratioTargetOf(row) ?? 0));
  const log = highest > LOG_SCALE_ABOVE;
  const lowest = Math.min(1, ...rows.map((row) => Math.max(row.ratio.min, 1e-3)));
  const lo = log ? 10 ** Math.floor(Math.log10(lowest)) : 0;
  const hi = log ? 10 ** Math.ceil(Math.log10(highest)) : highest * 1.08;
  const x = log
    ? (v: number): number => left + ((Math.log10(Math.max(v, lo)) - Math.log10(lo)) / (Math.log10(hi) - Math.log10(lo))) * (right - left)
    : (v: number): number => left + (Math.max(0, v) / hi) * (right - left);
  const base = log ? 1 : 0;
  const out = svgOpen(height, `${result.title}: ratio to the floor${log ? ' (log scale)' : ''}`);
  const axisY = top + rows.length * rowHeight;
  for (const t of log ? logTicks(lo, hi) : ticks(hi)) {
    out.push(`<line x1="${px(x(t))}" y1="${top - 4}" x2="${px(x(t))}" y2="${px(axisY)}" stroke="${COLOR.grid}"/>`);
    out.push(`<text x="${px(x(t))}" y="${px(axisY + 16)}" ${FONT} text-anchor="middle">${escapeXml(formatNumber(t))}×</text>`);
  }
  out.push(`<line x1="${px(x(1))}" y1="${top - 4}" x2="${px(x(1))}" y2="${px(axisY)}" stroke="${COLOR.axis}" stroke-dasharray="4 3"/>`);
  rows.forEach((row, index) => {
    const y = top + index * rowHeight;
    const met = rowMet(row);
    const fill = met === undefined ? COLOR.none : met ? COLOR.met : COLOR.missed;
    const label = row.label.length > 48 ? `${row.label.slice(0, 47)}…` : row.label;
    const [from, to] = [x(Math.min(base, row.ratio.median)), x(Math.max(base, row.ratio.median))];
    out.push(`<text x="${left - 8}" y="${px(y + 16)}" ${FONT} text-anchor="end">${escapeXml(label)}</text>`);
    out.push(`<rect x="${px(from)}" y="${px(y + 5)}" width="${px(to - from)}" height="14" fill="${fill}" fill-opacity="0.8"/>`);
    out.push(`<line x1="${px(x(row.ratio.min))}" y1="${px(y + 12)}" x2="${px(x(row.ratio.max))}" y2="${px(y + 12)}" stroke="${COLOR.axis}"/>`);
    for (const end of [row.ratio.min, row.ratio.max]) out.push(`<line x1="${px(x(end))}" y1="${px(y + 7)}" x2="${px(x(end))}" y2="${px(y + 17)}" stroke="${COLOR.axis}"/>`);
    const target = ratioTargetOf(row);
    if (target !== undefined) out.push(`<line x1="${px(x(target))}" y1="${px(y + 1)}" x2="${px(x(target))}" y2="${px(y + 23)}" stroke="${COLOR.target}" stroke-width="3"/>`);
  });
  out.push(
    `<text x="10" y="${px(height - 10)}" ${FONT}>bar: median ratio to the floor · whisker: min–max of the runs · black tick: target · dashed line: the floor (1×)</text>`,
    '</svg>',
  );
  return `${out.join('\n')}\n`;
}

/** A line per series over the x values (e.g. sweep time against backlog), with an optional dashed target line. */
export function linesSvg(title: string, chart: LineChart): string {
  const left = 70;
  const right = WIDTH - 190;
  const top = 40;
  const bottom = 300;
  const height = bottom + 50;
  const xs = chart.series.flatMap((s) => s.points.map(([xv]) => xv));
  const ys = chart.series.flatMap((s) => s.points.map(([, yv]) => yv));
  const xMax = Math.max(...xs) * 1.05 || 1;
  const yMax = Math.max(...ys, chart.target_line ?? 0) * 1.1 || 1;
  const x = (v: number): number => left + (v / xMax) * (right - left);
  const y = (v: number): number => bottom - (v / yMax) * (bottom - top);
  const out = svgOpen(height, title);
  for (const t of ticks(yMax)) {
    out.push(`<line x1="${left}" y1="${px(y(t))}" x2="${right}" y2="${px(y(t))}" stroke="${COLOR.grid}"/>`);
    out.push(`<text x="${left - 6}" y="${px(y(t) + 4)}" ${FONT} text-anchor="end">${escapeXml(formatNumber(t))}</text>`);
  }
  for (const t of ticks(xMax)) out.push(`<text x="${px(x(t))}" y="${bottom + 16}" ${FONT} text-anchor="middle">${escapeXml(formatNumber(t))}</text>`);
  out.push(`<line x1="${left}" y1="${bottom}" x2="${right}" y2="${bottom}" stroke="${COLOR.axis}"/>`, `<line x1="${left}" y1="${top}" x2="${left}" y2="${bottom}" stroke="${COLOR.axis}"/>`);
  out.push(`<text x="${px((left + right) / 2)}" y="${bottom + 36}" ${FONT} text-anchor="middle">${escapeXml(chart.x_label)}</text>`);
  out.push(`<text x="16" y="${px((top + bottom) / 2)}" ${FONT} text-anchor="middle" transform="rotate(-90 16 ${px((top + bottom) / 2)})">${escapeXml(chart.y_label)}</text>`);
  if (chart.target_line !== undefined) {
    out.push(`<line x1="${left}" y1="${px(y(chart.target_line))}" x2="${right}" y2="${px(y(chart.target_line))}" stroke="${COLOR.missed}" stroke-dasharray="6 4"/>`);
    out.push(`<text x="${right + 6}" y="${px(y(chart.target_line) + 4)}" ${FONT} fill="${COLOR.missed}">target ${escapeXml(formatNumber(chart.target_line))}</text>`);
  }
  chart.series.forEach((series, index) => {
    const color = SERIES_COLORS[index % SERIES_COLORS.length] as string;
    const points = [...series.points].sort((a, b) => a[0] - b[0]);
    out.push(`<polyline fill="none" stroke="${color}" stroke-width="2" points="${points.map(([a, b]) => `${px(x(a))},${px(y(b))}`).join(' ')}"/>`);
    for (const [a, b] of points) out.push(`<circle cx="${px(x(a))}" cy="${px(y(b))}" r="3" fill="${color}"/>`);
    const ly = top + 10 + index * 18;
    out.push(`<rect x="${right + 10}" y="${ly - 9}" width="12" height="4" fill="${color}"/>`);
    out.push(`<text x="${right + 28}" y="${ly - 3}" ${FONT}>${escapeXml(series.name.length > 24 ? `${series.name.slice(0, 23)}…` : series.name)}</text>`);
  });
  out.push('</svg>');
  return `${out.join('\n')}\n`;
}

/** The chart of a result: its own `lines` chart when it has one, else the ratio bars (undefined when there is nothing to draw). */
export function chartSvg(result: BenchResult): string | undefined {
  if (result.chart !== null && result.chart !== undefined) return linesSvg(result.title, result.chart);
  return ratioBarsSvg(result);
}
