#!/usr/bin/env node
// Totals every suite's report (vitest JSON, pytest JUnit XML) plus each
// orchestration step, prints one line per suite, then the closing line
// `N passed, M failed` and exits non-zero if anything failed.
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

const dir = process.argv[2] ?? '.test-results';
let passed = 0;
let failed = 0;
let skipped = 0;
const lines = [];

for (const file of existsSync(dir) ? readdirSync(dir).sort() : []) {
  const path = join(dir, file);
  if (file.startsWith('vitest-') && file.endsWith('.json')) {
    const r = JSON.parse(readFileSync(path, 'utf8'));
    // A file that fails to load has no test entries but counts as a failed suite.
    const loadFailures = (r.testResults ?? []).filter((s) => s.status === 'failed' && (s.assertionResults ?? []).length === 0).length;
    const p = r.numPassedTests ?? 0;
    const f = (r.numFailedTests ?? 0) + loadFailures;
    const s = (r.numPendingTests ?? 0) + (r.numTodoTests ?? 0);
    passed += p; failed += f; skipped += s;
    lines.push(`${file.replace(/\.json$/, '')}: ${p} passed, ${f} failed${s ? `, ${s} skipped` : ''}`);
  } else if (file.endsWith('.xml')) {
    const xml = readFileSync(path, 'utf8');
    const m = /<testsuite\b[^>]*>/.exec(xml)?.[0] ?? '';
    const attr = (k) => Number(new RegExp(`\\b${k}="(\\d+)"`).exec(m)?.[1] ?? 0);
    const total = attr('tests');
    const f = attr('failures') + attr('errors');
    const s = attr('skipped');
    passed += total - f - s; failed += f; skipped += s;
    lines.push(`${file.replace(/\.xml$/, '')}: ${total - f - s} passed, ${f} failed${s ? `, ${s} skipped` : ''}`);
  }
}

const stepsFile = join(dir, 'steps.tsv');
const steps = existsSync(stepsFile) ? readFileSync(stepsFile, 'utf8').trim().split('\n').filter(Boolean) : [];
for (const row of steps) {
  const [name, rc] = row.split('\t');
  // A failing orchestration step (install, build, typecheck, lint, a runner
  // that crashed) counts as one failure so a red step never hides behind
  // green test counts.
  if (rc !== '0') {
    failed += 1;
    lines.push(`step ${name}: exit ${rc}`);
  }
}
if (steps.length === 0 || passed + failed === 0) {
  failed += 1;
  lines.push('no test ran');
}

console.log(lines.join('\n'));
console.log(`${passed} passed, ${failed} failed${skipped ? `, ${skipped} skipped` : ''}`);
process.exit(failed > 0 ? 1 : 0);
