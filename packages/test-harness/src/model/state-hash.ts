/*
 * A 128-bit hash of a state key (four 32-bit multiply-xor lanes, finalized
 * murmur-style), so the explorer keeps a short string per visited state
 * instead of the key. Two distinct states share a hash with probability
 * about n^2 / 2^129 for n states: below 1e-24 at ten million states.
 */

function mix(h: number): number {
  let x = Math.imul(h ^ (h >>> 16), 0x85ebca6b);
  x = Math.imul(x ^ (x >>> 13), 0xc2b2ae35);
  return (x ^ (x >>> 16)) >>> 0;
}

export function stateHash(key: string): string {
  let a = 0x9e3779b9;
  let b = 0x243f6a88;
  let c = 0xb7e15162;
  let d = 0x7f4a7c15;
  for (let i = 0; i < key.length; i += 1) {
    const unit = key.charCodeAt(i);
    a = Math.imul(a ^ unit, 0x01000193);
    b = Math.imul(b ^ unit, 0x5bd1e995);
    c = Math.imul(c ^ unit, 0x27d4eb2f);
    d = Math.imul(d ^ unit, 0x165667b1);
  }
  a = mix(a ^ key.length ^ d);
  b = mix(b ^ a);
  c = mix(c ^ b);
  d = mix(d ^ c);
  return String.fromCharCode(a >>> 16, a & 0xffff, b >>> 16, b & 0xffff, c >>> 16, c & 0xffff, d >>> 16, d & 0xffff);
}
