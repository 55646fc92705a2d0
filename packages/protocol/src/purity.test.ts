import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

/*
 * @oduflow/protocol is pure: the master and the conformance runners rely on
 * it doing no I/O and reading no clock or environment. node:crypto (SHA-256)
 * is the one Node module it may import.
 */
const FORBIDDEN_MODULES = ['fs', 'fs/promises', 'net', 'http', 'https', 'child_process', 'worker_threads'];
const FORBIDDEN_USES: Array<[string, RegExp]> = [
  ['process.env', /\bprocess\s*\.\s*env\b/],
  ['Date.now', /\bDate\s*\.\s*now\b/],
  ['new Date(', /\bnew\s+Date\s*\(/],
];
// import ... from 'x', import 'x', export ... from 'x', import('x'), require('x')
const MODULE_SPECIFIER = /(?:\bfrom\s*|\bimport\s*\(?\s*|\brequire\s*\(\s*)['"]([^'"]+)['"]/g;

const sourceDir = import.meta.dirname;
const sources = readdirSync(sourceDir).filter((name) => name.endsWith('.ts') && !name.endsWith('.test.ts') && !name.endsWith('.test-d.ts'));

function importedModules(text: string): string[] {
  return [...text.matchAll(MODULE_SPECIFIER)].map((match) => (match[1] ?? '').replace(/^node:/, ''));
}

describe('the protocol package sources', () => {
  it('are found', () => {
    expect(sources).toContain('index.ts');
    expect(sources).toContain('canonical-json.ts');
  });

  it.each(sources)('%s imports no I/O module', (name) => {
    const imports = importedModules(readFileSync(join(sourceDir, name), 'utf8'));
    expect(imports.filter((module) => FORBIDDEN_MODULES.includes(module))).toStrictEqual([]);
  });

  it.each(sources)('%s reads no environment and no clock', (name) => {
    const text = readFileSync(join(sourceDir, name), 'utf8');
    expect(FORBIDDEN_USES.filter(([, pattern]) => pattern.test(text)).map(([use]) => use)).toStrictEqual([]);
  });

  it.each(sources)('%s imports only node:crypto among Node built-ins', (name) => {
    const imports = importedModules(readFileSync(join(sourceDir, name), 'utf8'));
    const nodeBuiltins = imports.filter((module) => !module.startsWith('.') && !['zod', 'fast-json-stable-stringify'].includes(module));
    expect(nodeBuiltins.filter((module) => module !== 'crypto')).toStrictEqual([]);
  });

  it('recognises every import form it forbids', () => {
    const sample = [
      "import { readFileSync } from 'node:fs';",
      'import * as net from "net";',
      "export { x } from 'http';",
      "const cp = await import('child_process');",
      "const w = require('worker_threads');",
    ].join('\n');
    expect(importedModules(sample)).toStrictEqual(['fs', 'net', 'http', 'child_process', 'worker_threads']);
  });
});
