/** The upstream budget without Redis: concurrency held, bounded waits, refusals. */
import { describe, expect, it } from 'vitest';
import { createUpstreamBudget } from '../../src/upstream-guard/upstream-budget.js';

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

describe('upstream budget: a prefetch only with a slot to spare', () => {
  const deferred = (): { promise: Promise<void>; release: () => void } => {
    let release = (): void => undefined;
    const promise = new Promise<void>((resolve) => {
      release = resolve;
    });
    return { promise, release };
  };

  it('runs a prefetch when a slot is free and nobody waits', async () => {
    const budget = createUpstreamBudget({ maxConcurrent: 2, maxPerSecond: 1000, replicas: 1, holdMs: 1_000 });
    expect(await budget.runSpare(() => Promise.resolve('prefetched'), 50)).toEqual({
      kind: 'ran',
      value: 'prefetched',
    });
    budget.close();
  });

  it('refuses a prefetch at once while a request waits in line, and never takes the slot it waits for', async () => {
    const budget = createUpstreamBudget({ maxConcurrent: 1, maxPerSecond: 1000, replicas: 1, holdMs: 1_000 });
    const holding = deferred();
    const first = budget.run(() => holding.promise.then(() => 'first'), 1_000);
    const waiting = budget.run(() => Promise.resolve('client'), 1_000); // in line behind `first`
    let prefetched = false;
    const spare = await budget.runSpare(async () => {
      prefetched = true;
    }, 1_000);
    expect(spare).toEqual({ kind: 'refused' });
    holding.release();
    expect(await first).toEqual({ kind: 'ran', value: 'first' });
    expect(await waiting).toEqual({ kind: 'ran', value: 'client' });
    expect(prefetched).toBe(false);
    budget.close();
  });

  it('gives a freed slot to a request that came after a waiting prefetch', async () => {
    const budget = createUpstreamBudget({ maxConcurrent: 1, maxPerSecond: 1000, replicas: 1, holdMs: 1_000 });
    const holding = deferred();
    const order: string[] = [];
    const first = budget.run(() => holding.promise.then(() => order.push('first')), 1_000);
    const spare = budget.runSpare(async () => order.push('prefetch'), 1_000); // nobody waited: it waits
    const client = budget.run(async () => order.push('client'), 1_000); // came later, served first
    holding.release();
    await Promise.all([first, spare, client]);
    expect(order.slice(0, 2)).toEqual(['first', 'client']);
    budget.close();
  });

  it('a prefetch a client joined takes the next slot, ahead of requests that came after the join', async () => {
    const budget = createUpstreamBudget({ maxConcurrent: 1, maxPerSecond: 1000, replicas: 1, holdMs: 1_000 });
    const holding = deferred();
    const order: string[] = [];
    const first = budget.run(() => holding.promise.then(() => order.push('first')), 1_000);
    let join = (): void => undefined;
    const spare = budget.runSpare(async () => order.push('prefetch'), 1_000, {
      whenPromoted: (promote) => (join = promote),
      waitMs: 1_000,
    });
    join(); // a client's request joined the prefetch
    const later = budget.run(async () => order.push('later'), 1_000);
    holding.release();
    await Promise.all([first, spare, later]);
    expect(order).toEqual(['first', 'prefetch', 'later']);
    budget.close();
  });

  it("refuses a prefetch when the second's starts are spent", async () => {
    const budget = createUpstreamBudget({ maxConcurrent: 10, maxPerSecond: 1, replicas: 1, holdMs: 1_000 });
    expect(await budget.run(() => Promise.resolve('client'), 50)).toEqual({ kind: 'ran', value: 'client' });
    // The second's one start is spent: no slot comes within the prefetch's wait.
    let prefetched = false;
    const spare = await budget.runSpare(async () => {
      prefetched = true;
    }, 200);
    expect(spare).toEqual({ kind: 'refused' });
    expect(prefetched).toBe(false);
    budget.close();
  });
});

describe('upstream budget: companies in turn', () => {
  /** A budget of one slot, its holder, and the order in which the waiting requests ran. */
  function oneSlot(companyWeights?: Record<string, number>) {
    const budget = createUpstreamBudget({
      maxConcurrent: 1,
      maxPerSecond: 1_000,
      replicas: 1,
      holdMs: 1_000,
      companyWeights,
    });
    let release = (): void => undefined;
    const holding = new Promise<void>((resolve) => {
      release = resolve;
    });
    const first = budget.run(() => holding, 5_000, 'storm');
    const order: string[] = [];
    const queue = (company: string, count: number): Promise<unknown>[] =>
      Array.from({ length: count }, () => budget.run(async () => void order.push(company), 5_000, company));
    return { budget, first, release, order, queue };
  }

  it('hands a company that waits behind another’s storm a slot in its turn, not after the storm', async () => {
    const { budget, first, release, order, queue } = oneSlot();
    const storm = queue('storm', 6);
    const other = queue('b', 2);
    release();
    await Promise.all([first, ...storm, ...other]);
    expect(order).toEqual(['storm', 'b', 'storm', 'b', 'storm', 'storm', 'storm', 'storm']);
    budget.close();
  });

  it('gives a company of weight 3 three slots to each of another’s one', async () => {
    const { budget, first, release, order, queue } = oneSlot({ paying: 3 });
    const paying = queue('paying', 6);
    const free = queue('free', 3);
    release();
    await Promise.all([first, ...paying, ...free]);
    expect(order.slice(0, 8)).toEqual(['paying', 'paying', 'paying', 'free', 'paying', 'paying', 'paying', 'free']);
    budget.close();
  });
});
