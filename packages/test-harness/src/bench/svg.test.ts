import { describe, expect, it } from 'vitest';
import type { BenchResult } from './result.js';
import { chartSvg, escapeXml, formatNumber, linesSvg, ratioBarsSvg } from './svg.js';

const base: BenchResult = {
  schema: 1,
  id: 'x',
  item: 3,
  title: 'Store <file> & "PG"',
  method: 'm',
  floor: 'f',
  mode: 'default',
  rows: [
    {
      label: 'dispatch <3 records>',
      unit: 'ms',
      value: { median: 3, min: 2, max: 4 },
      floor: { median: 2, min: 2, max: 2 },
      ratio: { median: 1.5, min: 1, max: 2 },
      higher_is_better: false,
      runs: 3,
      target: { kind: 'ratio_max', value: 1.25 },
    },
    { label: 'absolute', unit: 's', value: { median: 1, min: 1, max: 1 }, floor: null, ratio: null, higher_is_better: false, runs: 1, target: null },
  ],
  chart: null,
  notes: [],
  ok: true,
};

describe('SVG charts', () => {
  it('escapes text for element content and attributes', () => {
    expect(escapeXml(`a<b>&"c'`)).toBe('a&lt;b&gt;&amp;&quot;c&apos;');
  });

  it('formats numbers with at most three significant digits and no exponent', () => {
    expect([formatNumber(0), formatNumber(1.23456), formatNumber(0.000123456), formatNumber(123456)]).toEqual(['0', '1.23', '0.000123', '123,000']);
  });

  it('draws one ratio bar per row that has a ratio, red when the target is missed, with the target tick', () => {
    const svg = ratioBarsSvg(base) ?? '';
    expect(svg.startsWith('<svg xmlns="http://www.w3.org/2000/svg"')).toBe(true);
    expect(svg.trimEnd().endsWith('</svg>')).toBe(true);
    expect(svg.match(/<rect [^>]*fill-opacity/g)).toHaveLength(1);
    expect(svg).toContain('fill="#c0392b"');
    expect(svg).toContain('stroke-width="3"');
    expect(svg).toContain('dispatch &lt;3 records&gt;');
    expect(svg).toContain('Store &lt;file&gt; &amp; &quot;PG&quot;');
    expect(svg).not.toMatch(/<[^>]*[<][^>]*>/);
  });

  it('draws nothing when no row has a ratio', () => {
    expect(ratioBarsSvg({ ...base, rows: base.rows.slice(1) })).toBeUndefined();
  });

  it('is deterministic: a fixed input gives fixed text', () => {
    const chart = { kind: 'lines' as const, x_label: 'requests', y_label: 'sweep s', series: [{ name: 'batch 8', points: [[50_000, 40], [10_000, 8.9]] as [number, number][] }], target_line: 30 };
    const svg = linesSvg('Poll sweep', chart);
    expect(svg).toBe(linesSvg('Poll sweep', chart));
    expect(svg).toContain('<polyline fill="none" stroke="#1f77b4" stroke-width="2" points="');
    // Points are drawn in x order whatever order the series lists them.
    const points = /points="([^"]+)"/.exec(svg)?.[1]?.split(' ').map((p) => Number(p.split(',')[0]));
    expect(points).toEqual([...(points ?? [])].sort((a, b) => a - b));
    expect(svg).toContain('target 30');
    expect(chartSvg({ ...base, chart })).toBe(linesSvg(base.title, chart));
    expect(chartSvg(base)).toBe(ratioBarsSvg(base));
  });
});

describe('the ratio axis', () => {
  const withRatio = (median: number, max: number): BenchResult['rows'][number] => ({
    label: `r${median}`,
    unit: 'ms',
    value: { median, min: median, max },
    floor: { median: 1, min: 1, max: 1 },
    ratio: { median, min: median, max },
    higher_is_better: false,
    runs: 1,
    target: null,
  });

  it('is linear while the ratios are small and logarithmic once one is large', () => {
    expect(ratioBarsSvg({ ...base, rows: [withRatio(1.2, 1.5), withRatio(3, 4)] })).not.toContain('log scale');
    const svg = ratioBarsSvg({ ...base, rows: [withRatio(0.5, 0.6), withRatio(1.2, 1.5), withRatio(70, 120)] }) ?? '';
    expect(svg).toContain('ratio to the floor (log scale)');
    // Log ticks from 0.1× to 1000×, and every bar starts or ends at the floor line (1×).
    expect(svg).toContain('>0.1×</text>');
    expect(svg).toContain('>1000×</text>');
    const floorX = /<line x1="([\d.]+)"[^>]*stroke-dasharray="4 3"/.exec(svg)?.[1];
    const bars = [...svg.matchAll(/<rect x="([\d.]+)" y="[\d.]+" width="([\d.]+)"[^>]*fill-opacity/g)].map((m) => [Number(m[1]), Number(m[1]) + Number(m[2])]);
    expect(bars).toHaveLength(3);
    for (const [from, to] of bars) expect([from, to].some((end) => Math.abs((end as number) - Number(floorX)) < 0.11)).toBe(true);
  });
});
