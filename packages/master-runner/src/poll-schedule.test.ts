import { describe, expect, it } from 'vitest';
import { PollSchedule } from './poll-schedule.js';

const ID = '6f1c2b8e-4d3a-4b5c-9e7f-0a1b2c3d4e5f';
const running = (at: string) => ({ status: 'running' as const, at });
const noReturn = (at: string) => ({ failure: 'no_return' as const, at });

describe('poll schedule', () => {
  it('makes a request seen for the first time due at once', () => {
    const schedule = new PollSchedule();
    expect(schedule.seen(ID, 1, 1_000)).toBe(true);
  });

  it('polls a request that keeps answering the same less and less often, up to the cap', () => {
    const schedule = new PollSchedule({ minIntervalMs: 1_000, maxIntervalMs: 5_000, jitter: 0 });
    schedule.seen(ID, 1, 0);
    const gaps: number[] = [];
    let now = 0;
    for (let i = 0; i < 6; i += 1) {
      schedule.polled(ID, running(`t${i}`), now);
      const next = schedule.nextDueAtMs() as number;
      gaps.push(next - now);
      now = next;
    }
    expect(gaps).toEqual([1_000, 2_000, 4_000, 5_000, 5_000, 5_000]);
    expect(schedule.seen(ID, 2, now - 1)).toBe(false);
    expect(schedule.seen(ID, 2, now)).toBe(true);
  });

  it('starts again from the shortest interval when the answer changes', () => {
    const schedule = new PollSchedule({ minIntervalMs: 1_000, maxIntervalMs: 60_000, jitter: 0 });
    schedule.seen(ID, 1, 0);
    schedule.polled(ID, noReturn('a'), 0);
    schedule.polled(ID, noReturn('b'), 0);
    schedule.polled(ID, noReturn('c'), 0);
    expect(schedule.nextDueAtMs()).toBe(4_000);
    schedule.polled(ID, running('d'), 0);
    expect(schedule.nextDueAtMs()).toBe(1_000);
  });

  it('spreads intervals by the jitter, both ways', () => {
    const low = new PollSchedule({ minIntervalMs: 1_000, jitter: 0.2, random: () => 0 });
    const high = new PollSchedule({ minIntervalMs: 1_000, jitter: 0.2, random: () => 0.999 });
    for (const s of [low, high]) {
      s.seen(ID, 1, 0);
      s.polled(ID, running('x'), 0);
    }
    expect(low.nextDueAtMs()).toBe(800);
    expect(high.nextDueAtMs()).toBe(1_200);
  });

  it('forgets requests a whole walk did not see', () => {
    const schedule = new PollSchedule();
    const other = '1d2e3f40-5a6b-4c7d-8e9f-a0b1c2d3e4f5';
    schedule.seen(ID, 1, 0);
    schedule.seen(other, 1, 0);
    schedule.seen(ID, 2, 0);
    schedule.pruneUnseen(2);
    expect(schedule.size).toBe(1);
    expect(schedule.due(0)).toEqual([ID]);
  });
});
