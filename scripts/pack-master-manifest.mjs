#!/usr/bin/env node
/*
 * Writes the package.json of the pack:master artefact (scripts/pack-master.sh):
 * one dependency per packed tarball in <dir>/packages, and an override that
 * pins every nested use of our packages to that same tarball, so npm never
 * looks up an @oduflow package in a registry (where someone else could
 * publish one). Usage: node scripts/pack-master-manifest.mjs <dir> <version>
 */
import { readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

const [dir, version] = process.argv.slice(2);
if (dir === undefined || version === undefined) {
  console.error('usage: node scripts/pack-master-manifest.mjs <dir> <version>');
  process.exit(2);
}

// npm pack names a tarball <scope>-<name>-<version>.tgz.
const PACKAGES = {
  '@oduflow/protocol': 'oduflow-protocol',
  '@oduflow/receipt-store': 'oduflow-receipt-store',
  '@oduflow/job-envelope': 'oduflow-job-envelope',
  '@oduflow/minion-wrapper': 'oduflow-minion-wrapper',
  '@oduflow/master-runner': 'oduflow-master-runner',
  'oduflow-master': 'oduflow-master',
};

const tarballs = new Set(readdirSync(join(dir, 'packages')));
const dependencies = {};
for (const [name, file] of Object.entries(PACKAGES)) {
  const tarball = `${file}-${version}.tgz`;
  if (!tarballs.has(tarball)) {
    console.error(`pack-master: ${tarball} was not packed`);
    process.exit(1);
  }
  dependencies[name] = `file:packages/${tarball}`;
}
// The repository's own third-party overrides too (e.g. a version held back for Node 20), so the host installs what was tested.
const rootManifest = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8'));
const overrides = {
  ...(rootManifest.overrides ?? {}),
  ...Object.fromEntries(Object.keys(PACKAGES).filter((n) => n !== 'oduflow-master').map((n) => [n, `$${n}`])),
};

const manifest = {
  name: 'oduflow-master-install',
  version,
  private: true,
  description: 'oduflow-master for a master host: run `npm ci --omit=dev` here, then put node_modules/.bin/oduflow-master on the PATH.',
  license: 'Apache-2.0',
  engines: { node: '>=20.18' },
  dependencies,
  overrides,
  // receipt-store compiles its Node-API addon at install (a C compiler and the Node-API headers).
  allowScripts: { '@oduflow/receipt-store': true },
};
writeFileSync(join(dir, 'package.json'), `${JSON.stringify(manifest, null, 2)}\n`);
