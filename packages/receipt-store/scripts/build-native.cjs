#!/usr/bin/env node
// Builds build/Release/receipt_store.node from native/receipt_store.c.
// Runs as this package's `install` script, so `npm ci` / `npm install` build it.
//
// Why not node-gyp: the addon is one C file on plain Node-API, and node-gyp's
// `configure` wants the full Node development tree (common.gypi, config.gypi).
// Without `nodedir` it downloads that tree from nodejs.org, which a clean
// machine that reaches only the npm registry cannot do. A Node-API addon
// needs nothing but the Node-API headers and a C compiler: the symbols are
// resolved against the running node binary when the addon is loaded. So this
// script compiles it directly with `cc`, taking the headers from the
// `node-api-headers` package (from the npm registry) or, failing that, from
// the headers installed next to node (<prefix>/include/node).
// binding.gyp describes the same build for people who prefer node-gyp.
'use strict';

const { spawnSync } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');

const packageDir = path.resolve(__dirname, '..');
const source = path.join(packageDir, 'native', 'receipt_store.c');
const outDir = path.join(packageDir, 'build', 'Release');
const target = path.join(outDir, 'receipt_store.node');

function fail(message) {
  console.error(`@oduflow/receipt-store: ${message}`);
  process.exit(1);
}

if (process.platform !== 'linux') {
  // The store relies on Linux-only calls (renameat2, flock semantics, O_NOFOLLOW
  // walks). Do not break installs of the rest of a workspace elsewhere; the
  // library reports a clear error when it is used.
  console.warn(`@oduflow/receipt-store: skipping the native build on ${process.platform} (Linux only)`);
  process.exit(0);
}

// `--if-stale` (used by the `build` script): do nothing when the addon is newer
// than its source and this script, so editing the C file and running the
// package build is enough, without a reinstall.
if (process.argv.includes('--if-stale')) {
  try {
    const built = fs.statSync(target).mtimeMs;
    if (built >= fs.statSync(source).mtimeMs && built >= fs.statSync(__filename).mtimeMs) process.exit(0);
  } catch {
    // not built yet: build it
  }
}

function headerDirs() {
  const dirs = [];
  try {
    dirs.push(require('node-api-headers').include_dir);
  } catch {
    // not installed: fall through to the headers that ship with node
  }
  dirs.push(path.join(path.dirname(process.execPath), '..', 'include', 'node'));
  if (process.env.npm_config_nodedir) dirs.push(path.join(process.env.npm_config_nodedir, 'include', 'node'));
  return dirs.filter((dir) => fs.existsSync(path.join(dir, 'node_api.h')));
}

const includeDir = headerDirs()[0];
if (includeDir === undefined) {
  fail('no Node-API headers found: install the node-api-headers package or Node development headers');
}

const cc = process.env.CC || 'cc';
fs.mkdirSync(outDir, { recursive: true });
// Compile to a private temporary name and rename: a process loading the addon
// meanwhile sees either the old binary or the new one, never a partial file.
const temporary = `${target}.tmp-${process.pid}`;
const args = [
  '-std=gnu11',
  '-O2',
  '-fPIC',
  '-shared',
  '-fvisibility=hidden',
  '-Wall',
  '-Wextra',
  '-Wno-unused-parameter',
  '-DNAPI_VERSION=8',
  '-I',
  includeDir,
  '-o',
  temporary,
  source,
];
const started = Date.now();
const result = spawnSync(cc, args, { stdio: 'inherit' });
if (result.error) {
  fs.rmSync(temporary, { force: true });
  fail(`cannot run the C compiler "${cc}" (${result.error.message}); install gcc or set CC`);
}
if (result.status !== 0) {
  fs.rmSync(temporary, { force: true });
  fail(`"${cc}" failed with exit status ${result.status}`);
}
fs.renameSync(temporary, target);
console.log(
  `@oduflow/receipt-store: built ${path.relative(packageDir, target)} with ${cc} against ${includeDir} in ${Date.now() - started} ms`,
);
