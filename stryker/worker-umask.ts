// Stryker's vitest runner runs the tests in worker threads, where process.umask(mask)
// throws. The three umask tests (receipt-store) then run against an emulated umask:
// the real one stays as it is, so under mutation testing they check the modes but not
// the umask handling (documented in packages/test-harness/README.md).
import { isMainThread } from 'node:worker_threads';

if (!isMainThread) {
  const real = process.umask.bind(process);
  let emulated: number | undefined;
  process.umask = ((mask?: number | string) => {
    const previous = emulated ?? real();
    if (mask !== undefined) emulated = typeof mask === 'string' ? Number.parseInt(mask, 8) : mask;
    return previous;
  }) as typeof process.umask;
}
