/**
 * Leased points (src/limits/leased-window.ts) against a count in memory: the batch rule, a lease
 * spent synchronously and refilled ahead, waiting decisions sharing a reservation, a key spent
 * everywhere refused from memory, and a failed reservation. test/system/limits-leases.test.ts
 * runs the same on a real Redis, with two replicas.
 */
import { RateLimiterRes } from 'rate-limiter-flexible';
import { describe, expect, it } from 'vitest';
import { firstBatch, LeasedWindow, largestBatch, nextBatch, type SharedCount } from '../../src/limits/leased-window.js';

const DURATION_MS = 60_000;

/** rate-limiter-flexible's fixed window, in memory: over the points, the count is a rejection. */
class CountInMemory implements SharedCount {
  /** The points of each reservation asked for, in order. */
  readonly reservations: number[] = [];
  failNext = false;
  readonly #windows = new Map<string, { consumed: number; readonly resetAt: number }>();

  constructor(
    readonly points: number,
    readonly clock: { now: number },
  ) {}

  consume(key: string | number, points = 1): Promise<RateLimiterRes> {
    this.reservations.push(points);
    if (this.failNext) {
      this.failNext = false;
      return Promise.reject(new Error('connection lost'));
    }
    const now = this.clock.now;
    let window = this.#windows.get(String(key));
    if (window === undefined || window.resetAt <= now) {
      window = { consumed: 0, resetAt: now + DURATION_MS };
      this.#windows.set(String(key), window);
    }
    window.consumed += points;
    const res = new RateLimiterRes(Math.max(0, this.points - window.consumed), window.resetAt - now, window.consumed);
    return window.consumed > this.points ? Promise.reject(res) : Promise.resolve(res);
  }
}

function leased(
  points: number,
  replicas: number | (() => number),
): { window: LeasedWindow; count: CountInMemory; failures: () => number } {
  const clock = { now: 1_000_000 };
  const count = new CountInMemory(points, clock);
  let failures = 0;
  const window = new LeasedWindow({
    name: 'credential',
    points,
    shared: count,
    health: {
      failed: () => {
        failures += 1;
      },
    },
    replicas: typeof replicas === 'number' ? () => replicas : replicas,
    now: () => clock.now,
  });
  return { window, count, failures: () => failures };
}

describe('the batch rule', () => {
  it('the largest batch is a sixteenth of the replica’s share, at least one point', () => {
    expect(largestBatch(200, 2)).toBe(6);
    expect(largestBatch(1_000_000, 2)).toBe(31_250);
    expect(largestBatch(10, 4)).toBe(1);
  });

  it('starts at 100 points, or the largest if smaller', () => {
    expect(firstBatch(31_250)).toBe(100);
    expect(firstBatch(6)).toBe(6);
    expect(nextBatch(undefined, 0, 31_250)).toBe(100);
  });

  it('doubles while a batch lasts under 100 ms, halves when it lasts over 400 ms, within first and largest', () => {
    const previous = { batch: 800, reservedAt: 0 };
    expect(nextBatch(previous, 99, 31_250)).toBe(1_600);
    expect(nextBatch(previous, 100, 31_250)).toBe(800);
    expect(nextBatch(previous, 400, 31_250)).toBe(800);
    expect(nextBatch(previous, 401, 31_250)).toBe(400);
    expect(nextBatch({ batch: 100, reservedAt: 0 }, 401, 31_250)).toBe(100);
    expect(nextBatch({ batch: 20_000, reservedAt: 0 }, 10, 31_250)).toBe(31_250);
  });
});

describe('LeasedWindow', () => {
  it('spends a lease synchronously, and reserves the next batch ahead, in the background', async () => {
    const { window, count } = leased(1_000_000, 2);
    const first = window.count('k');
    expect(first).toBeInstanceOf(Promise);
    expect(await first).toMatchObject({ consumed: 1, points: 1_000_000, msBeforeNext: DURATION_MS });
    // 99 points left of the first batch of 100; a quarter of it left starts the next reservation.
    for (let i = 2; i <= 75; i++) expect(window.count('k')).toMatchObject({ consumed: i });
    expect(count.reservations).toEqual([100, 200]); // the batch lasted no time at all: doubled
    await new Promise((resolve) => setImmediate(resolve));
    for (let i = 76; i <= 300; i++) expect(window.count('k')).toMatchObject({ consumed: i });
    expect(count.reservations).toEqual([100, 200, 400]);
  });

  it('decisions waiting for a key share its reservations, sized to their demand', async () => {
    const { window, count } = leased(200, 2); // batches of at most 6
    const counts = await Promise.all(Array.from({ length: 40 }, () => window.count('k')));
    expect(counts.map((c) => c?.consumed).sort((a = 0, b = 0) => a - b)).toEqual(
      Array.from({ length: 40 }, (_, i) => i + 1),
    );
    // The first reservation is the first waiting decision's; the next is for all the others.
    const [first, next = 0, ...more] = count.reservations;
    expect(first).toBe(6);
    expect(next).toBeGreaterThanOrEqual(34);
    expect(more).toEqual([]);
  });

  it('a batch of one is not reserved ahead; a key spent everywhere is refused from memory until it resets', async () => {
    const { window, count } = leased(3, 1);
    for (let i = 1; i <= 3; i++) {
      const counted = window.count('k');
      expect(counted).toBeInstanceOf(Promise);
      expect(await counted).toMatchObject({ consumed: i });
    }
    // The count in Redis has reached the points: refused here, without asking again.
    expect(window.count('k')).toMatchObject({ consumed: 4, points: 3, msBeforeNext: DURATION_MS });
    expect(window.count('k')).toMatchObject({ consumed: 4 });
    expect(count.reservations).toEqual([1, 1, 1]);
    count.clock.now += DURATION_MS;
    expect(await window.count('k')).toMatchObject({ consumed: 1 });
  });

  it('a failed reservation counts nothing and is told to the breaker', async () => {
    const { window, count, failures } = leased(1_000, 1);
    count.failNext = true;
    expect(await window.count('k')).toBeUndefined();
    expect(failures()).toBe(1);
    expect(await window.count('k')).toMatchObject({ consumed: 1 });
  });

  it('reserves ahead by the batch the replicas counted give, not by the replicas it started with', async () => {
    // 60 points: batches of 3 for one replica, of one for 40. The replicas are counted after the start.
    let replicas = 1;
    const many = leased(60, () => replicas);
    replicas = 40;
    expect(await many.window.count('k')).toMatchObject({ consumed: 1 });
    await new Promise((resolve) => setImmediate(resolve));
    expect(many.count.reservations).toEqual([1]); // a batch of one: nothing reserved ahead
    replicas = 40;
    const few = leased(60, () => replicas);
    replicas = 1;
    expect(await few.window.count('k')).toMatchObject({ consumed: 1 });
    expect(few.window.count('k')).toMatchObject({ consumed: 2 });
    expect(few.window.count('k')).toMatchObject({ consumed: 3 }); // the last of the batch: the next is reserved
    await new Promise((resolve) => setImmediate(resolve));
    expect(few.window.count('k')).toMatchObject({ consumed: 4 });
    expect(few.count.reservations).toEqual([3, 3]);
  });
});
