/*
 * Realistic custom high data of a chosen size, from a fixed seed: the same
 * bytes on every run and on every machine. The canonical-JSON ratio bench of
 * both languages reads the texts this module writes to
 * bench/high-data-inputs.json (tests/bench-inputs.test.ts keeps that file
 * equal to what this module generates), so TypeScript and Python measure the
 * very same bytes.
 */
import { createHash } from 'node:crypto';
import { type HighData, type JsonValue, canonicalJson } from '../src/index.js';

/** mulberry32: a tiny, fast, seedable PRNG. */
export function prng(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Helpers drawing from one PRNG stream. */
export function vocabulary(random: () => number) {
  const int = (below: number): number => Math.floor(random() * below);
  const pick = <T>(items: readonly T[]): T => items[int(items.length)] as T;
  const word = (): string =>
    pick(['nginx', 'postgres', 'redis', 'app', 'worker', 'cron', 'backup', 'metrics', 'agent', 'proxy', 'café', 'ñandú']);
  const hex = (length: number): string => Array.from({ length }, () => '0123456789abcdef'[int(16)]).join('');
  const uuid7 = (): string => `${hex(8)}-${hex(4)}-7${hex(3)}-${pick(['8', '9', 'a', 'b'])}${hex(3)}-${hex(12)}`;
  /** A config file body: lines of settings, some with non-ASCII and escapes, like a templated config. */
  const configText = (lines: number): string => {
    const out: string[] = [];
    for (let index = 0; index < lines; index += 1) {
      out.push(`${word()}_${index}=${pick(['"on"', 'off', `${int(65536)}`, `/srv/${word()}/${hex(6)}`, 'tab\there'])}`);
    }
    return `${out.join('\n')}\n`;
  };
  return { int, pick, word, hex, uuid7, configText };
}

type Vocabulary = ReturnType<typeof vocabulary>;

/** One Salt state body of a random, realistic kind. */
function stateBody(v: Vocabulary, id: string): JsonValue {
  switch (v.int(5)) {
    case 0:
      return {
        'file.managed': [
          { name: `/etc/${v.word()}/${id}.conf` },
          { user: 'root' },
          { group: v.word() },
          { mode: '0640' },
          { contents: v.configText(6 + v.int(10)) },
          { require: [{ pkg: `pkg-${v.word()}` }] },
        ],
      };
    case 1:
      return { 'pkg.installed': [{ pkgs: Array.from({ length: 3 + v.int(6) }, () => `${v.word()}-${v.int(10)}.${v.int(30)}`) }, { refresh: false }] };
    case 2:
      return { service: ['running', { name: v.word() }, { enable: true }, { watch: [{ file: `/etc/${v.word()}/${id}.conf` }] }] };
    case 3:
      return {
        'user.present': [{ name: `svc-${v.word()}` }, { uid: 2000 + v.int(5000) }, { shell: '/usr/sbin/nologin' }, { groups: [v.word(), v.word()] }],
      };
    default:
      return {
        'cmd.run': [
          { name: `/usr/local/bin/${v.word()} --migrate --id ${v.uuid7()}` },
          { unless: `test -f /var/lib/${v.word()}/${id}.done` },
          { timeout: 300 },
        ],
      };
  }
}

/** The seed of every generated document: a document of another size is another draw from the same stream. */
const HIGH_DATA_SEED = 0x0d0f1a7;

/**
 * Custom high data of at least `minBytes` bytes of canonical JSON (the cap is
 * 65 536): file.managed with config bodies, pkg.installed, service with watch,
 * user.present, cmd.run, some non-ASCII. States are added until the size is
 * reached, so the result is at most one state body over `minBytes`.
 */
export function highData(minBytes: number, seed = HIGH_DATA_SEED): HighData {
  const v = vocabulary(prng(seed));
  const data: Record<string, JsonValue> = {};
  let bytes = 2; // "{}"
  for (let index = 0; bytes < minBytes; index += 1) {
    const id = `${v.word()}-${index}`;
    const body = stateBody(v, id);
    data[id] = body;
    // `"id":body` plus a comma after the first state; keys are unique, so the sum is the canonical size.
    bytes += Buffer.byteLength(canonicalJson(id), 'utf8') + 1 + Buffer.byteLength(canonicalJson(body), 'utf8') + (index === 0 ? 0 : 1);
  }
  return data as HighData;
}

/** One input of the ratio bench: its canonical text, size and SHA-256 (checked on read by both benches). */
export interface HighDataInput {
  label: string;
  kib: number;
  bytes: number;
  states: number;
  sha256: string;
  state_data_json: string;
}

/** The bench sizes, KiB: small, medium, near the 64 KiB cap. */
const BENCH_SIZES_KIB = [1, 16, 60] as const;

function highDataInput(kib: number): HighDataInput {
  const data = highData(kib * 1024);
  const text = canonicalJson(data);
  return {
    label: `${kib} KiB`,
    kib,
    bytes: Buffer.byteLength(text, 'utf8'),
    states: Object.keys(data).length,
    sha256: createHash('sha256').update(text, 'utf8').digest('hex'),
    state_data_json: text,
  };
}

/** The whole content of bench/high-data-inputs.json. */
export function highDataInputsFile(): { description: string; seed: number; inputs: HighDataInput[] } {
  return {
    description:
      'Custom high data for the canonical-JSON ratio benches (TypeScript and Python), generated by packages/protocol/bench/high-data.ts; regenerate with `node bench/run-canonical-json.mjs --write-inputs`.',
    seed: HIGH_DATA_SEED,
    inputs: BENCH_SIZES_KIB.map(highDataInput),
  };
}
