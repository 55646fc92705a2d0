import { createHash } from 'node:crypto';
import { existsSync, readFileSync, readdirSync, statSync } from 'node:fs';
import { dirname, extname, join, relative, sep } from 'node:path';
import { fileURLToPath } from 'node:url';

/*
 * The dashboard's built front end (apps/dashboard, `vite build`), read once
 * at start into memory: a handful of small files, served from a fixed map,
 * so no request path ever reaches the file system. Hashed assets are
 * immutable; the HTML shell is revalidated (ETag) so a new release shows at
 * once.
 */

export interface Asset {
  readonly body: Buffer;
  readonly type: string;
  readonly etag: string;
  readonly immutable: boolean;
}

export interface DashboardAssets {
  readonly dir: string;
  /** The HTML shell, answered for every page of the dashboard. */
  readonly index: Asset;
  /** By path under /ui/ (e.g. `assets/index-3f2a.js`). */
  readonly files: ReadonlyMap<string, Asset>;
}

const TYPES: Readonly<Record<string, string>> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.json': 'application/json',
  '.txt': 'text/plain; charset=utf-8',
};

/** At most this many bytes in all (a guard against pointing the service at the wrong directory). */
const MAX_TOTAL_BYTES = 16 * 1024 * 1024;

function walk(dir: string, out: string[]): void {
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) walk(path, out);
    else if (entry.isFile()) out.push(path);
  }
}

/**
 * Where the built dashboard is: `ui/` beside the bundled service (the
 * build copies it there, so an installed release carries it), else the
 * workspace's own build output (the service run from its sources, in tests).
 */
export function defaultAssetsDir(): string | undefined {
  const here = dirname(fileURLToPath(import.meta.url));
  const candidates = [join(here, 'ui'), join(here, '..', '..', '..', '..', 'dashboard', 'dist')];
  return candidates.find((dir) => existsSync(join(dir, 'index.html')));
}

export function loadDashboardAssets(dir: string): DashboardAssets {
  const paths: string[] = [];
  walk(dir, paths);
  const files = new Map<string, Asset>();
  let total = 0;
  for (const path of paths) {
    const type = TYPES[extname(path)];
    if (type === undefined) continue; // source maps and anything unknown stay on disk
    const body = readFileSync(path);
    total += statSync(path).size;
    if (total > MAX_TOTAL_BYTES) throw new Error(`the dashboard assets in ${dir} are larger than ${MAX_TOTAL_BYTES} bytes`);
    const name = relative(dir, path).split(sep).join('/');
    files.set(name, {
      body,
      type,
      etag: `"${createHash('sha256').update(body).digest('base64url').slice(0, 27)}"`,
      // Vite names every file under assets/ by its content hash.
      immutable: name.startsWith('assets/'),
    });
  }
  const index = files.get('index.html');
  if (index === undefined) throw new Error(`the dashboard assets in ${dir} have no index.html`);
  return { dir, index, files };
}

/**
 * The policy every dashboard response carries. Scripts, styles, images and
 * connections only from this origin, no inline code, no framing, no other
 * origin for forms or the base URL, and Trusted Types with no policy: the
 * front end never writes HTML from a string.
 */
export const CONTENT_SECURITY_POLICY = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self'",
  "connect-src 'self'",
  "manifest-src 'self'",
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'none'",
  "require-trusted-types-for 'script'",
  "trusted-types 'none'",
].join('; ');

export const SECURITY_HEADERS: Readonly<Record<string, string>> = {
  'content-security-policy': CONTENT_SECURITY_POLICY,
  'x-content-type-options': 'nosniff',
  'x-frame-options': 'DENY',
  'referrer-policy': 'no-referrer',
  'cross-origin-opener-policy': 'same-origin',
  'cross-origin-resource-policy': 'same-origin',
  'permissions-policy': 'camera=(), microphone=(), geolocation=(), payment=(), usb=()',
};
