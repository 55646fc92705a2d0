// Stryker's vitest runner runs the tests in worker threads, where process.umask(mask)
// throws. The three umask tests (receipt-store) then run against an emulated umask:
// the real one stays as it is, so under mutation testing they check the modes but not
// the umask handling (documented in packages/test-harness/README.md).
import { isMainThread } from 'node:worker_threads';

/* eslint-disable @typescript-eslint/no-deprecated -- the no-argument umask() is exactly what this emulates for worker threads */
if (!isMainThread) {
  const real = process.umask.bind(process);
  let emulated: number | undefined;
  const emulate = (mask?: number | string): number => {
    const previous = emulated ?? real();
    if (mask !== undefined) emulated = typeof mask === 'string' ? Number.parseInt(mask, 8) : mask;
    return previous;
  };
  process.umask = emulate;
}
/* eslint-enable @typescript-eslint/no-deprecated */
