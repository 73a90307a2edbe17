/** The upstream budget without Redis: concurrency held, bounded waits, refusals. */
import { describe, expect, it } from 'vitest';
import { createUpstreamBudget } from '../../src/limits/upstream-budget.js';

describe('upstream budget (one replica)', () => {
  it('holds the concurrency cap and refuses a job that gets no slot within its wait', async () => {
    const budget = createUpstreamBudget({ maxConcurrent: 1, maxPerSecond: 1000, replicas: 1, holdMs: 1_000 });
    let release: (() => void) | undefined;
    const held = new Promise<void>((resolve) => {
      release = resolve;
    });
    let ranSecond = false;
    const first = budget.run(() => held.then(() => 'first'), 1_000);
    const second = await budget.run(async () => {
      ranSecond = true;
      return 'second';
    }, 50);
    expect(second).toEqual({ kind: 'refused' });
    release?.();
    expect(await first).toEqual({ kind: 'ran', value: 'first' });
    // The refused request left nothing behind in the queue: the next one runs at once.
    expect(await budget.run(() => Promise.resolve('third'), 1_000)).toEqual({ kind: 'ran', value: 'third' });
    expect(ranSecond).toBe(false);
    budget.close();
  });

  it('gives each replica its share when several share the limits', async () => {
    const budget = createUpstreamBudget({ maxConcurrent: 4, maxPerSecond: 1000, replicas: 4, holdMs: 1_000 });
    let release: (() => void) | undefined;
    const held = new Promise<void>((resolve) => {
      release = resolve;
    });
    const first = budget.run(() => held, 1_000);
    expect(await budget.run(() => Promise.resolve(1), 50)).toEqual({ kind: 'refused' }); // 4 / 4 = 1 slot
    release?.();
    await first;
    budget.close();
  });
});
