/**
 * The model behind the freshness advice (docs/cache.md#freshness-advice): the change-rate
 * estimator recovers a known Poisson rate from simulated refreshes; the stale share and the
 * expected staleness of a read match their definitions integrated numerically and known values;
 * the advice's stale share comes within 25% of what readers get in a Monte-Carlo run of the read
 * service's serving and refresh rules;
 * the suggested TTL is the longest whole second that meets the target, clamped to [1, 86400];
 * a resource's figures are null, with a note, where nothing is known.
 */
import { describe, expect, it } from 'vitest';
import {
  ALWAYS_CHANGED_NOTE,
  adviceFor,
  type CopyCycle,
  changeRate,
  expectedStaleness,
  MAX_SUGGESTED_TTL,
  MIN_SUGGESTED_TTL,
  NO_CHANGE_NOTE,
  NO_REFRESH_NOTE,
  STALE_AFTER_SECONDS,
  staleReadShare,
  suggestedTtl,
  type WindowTotals,
} from '../../src/cache/freshness/freshness-advice.js';
import { prng } from '../../src/sandbox/dataset.js';

/** A seeded generator (the sandbox's mulberry32): the simulations give the same draws on every run. */
const seeded = prng;

/** The mean of `f` over [0, t], by the midpoint rule. */
function meanOver(t: number, f: (u: number) => number, steps = 100_000): number {
  let sum = 0;
  for (let i = 0; i < steps; i++) sum += f(((i + 0.5) * t) / steps);
  return sum / steps;
}

describe('changeRate', () => {
  it('is the bias-reduced estimator: -ln((n - c + 0.5) / (n + 0.5)) / mean(h)', () => {
    expect(changeRate({ refreshes: 4, changed: 1, heldSeconds: 60 })).toBeCloseTo(Math.log(4.5 / 3.5) / 15, 12);
  });

  it('is 0 without a change, finite when every refresh found one, undefined with nothing to judge', () => {
    expect(changeRate({ refreshes: 10, changed: 0, heldSeconds: 100 })).toBe(0);
    const always = changeRate({ refreshes: 10, changed: 10, heldSeconds: 100 });
    expect(Number.isFinite(always)).toBe(true);
    expect(always).toBeGreaterThan(10 / 100);
    expect(changeRate({ refreshes: 0, changed: 0, heldSeconds: 0 })).toBeUndefined();
  });

  it('comes to c / Σh when changes are rare against refreshes', () => {
    const rate = changeRate({ refreshes: 10_000, changed: 10, heldSeconds: 300_000 }) ?? 0;
    expect(rate / (10 / 300_000)).toBeCloseTo(1, 3);
  });

  it.each([
    { every: 60, held: 30 },
    { every: 60, held: 120 },
    { every: 10, held: 15 },
  ])('recovers a change every $every s from refreshes after $held s held', ({ every, held }) => {
    const rate = 1 / every;
    const random = seeded(every * 1000 + held);
    let changed = 0;
    const refreshes = 20_000;
    // Each refresh finds a change when the next change of a Poisson process comes within `held`.
    for (let i = 0; i < refreshes; i++) if (-Math.log(1 - random()) / rate < held) changed++;
    const estimate = changeRate({ refreshes, changed, heldSeconds: refreshes * held }) ?? 0;
    expect(estimate / rate).toBeGreaterThan(0.95);
    expect(estimate / rate).toBeLessThan(1.05);
    // The naive c / Σh undercounts once changes are about as frequent as refreshes.
    if (held >= every) expect(changed / (refreshes * held) / rate).toBeLessThan(0.9);
  });
});

describe('staleReadShare', () => {
  /** The plain cycle: a copy served for its TTL, then replaced at once. */
  const plain = (ttl: number): CopyCycle => ({ ttl, staleWindow: 0, ahead: 0, wait: 0 });

  it('is 1 - (1 - e^{-λt}) / (λt) in the plain cycle without a grace: a change every minute, a TTL of 30 s', () => {
    expect(staleReadShare(1 / 60, plain(30), 0)).toBeCloseTo(1 - (1 - Math.exp(-0.5)) / 0.5, 12);
    expect(staleReadShare(1 / 60, plain(30), 0)).toBeCloseTo(0.213061, 6);
  });

  it.each([
    { rate: 1 / 60, ttl: 30, staleWindow: 30, ahead: 0, wait: 0 },
    { rate: 1 / 5, ttl: 10, staleWindow: 30, ahead: 0.1, wait: 4 },
    { rate: 1 / 20, ttl: 10, staleWindow: 30, ahead: 0.1, wait: 0.05 },
    { rate: 1 / 60, ttl: 10, staleWindow: 0, ahead: 0, wait: 5 },
    { rate: 0.5, ttl: 10, staleWindow: 5, ahead: 0.5, wait: 20 },
    { rate: 1 / 3600, ttl: 300, staleWindow: 30, ahead: 0.1, wait: 2 },
    { rate: 2, ttl: 0.5, staleWindow: 30, ahead: 0, wait: 3 },
  ])(
    'is E[∫ stale over a cycle] / E[cycle], integrated (λ $rate, t $ttl, window $staleWindow, ahead $ahead, wait $wait)',
    (cycle) => {
      const { rate } = cycle;
      const point = cycle.ttl * (1 - cycle.ahead / 2);
      const servedUntil = cycle.ttl + cycle.staleWindow;
      // A read at age a misses a change older than the grace; past the stale window it waits for the fill.
      const stale = (a: number): number => (a <= 1 || a >= servedUntil ? 0 : 1 - Math.exp(-rate * (a - 1)));
      // The chance the cycle (P + an exponential wait) lasts past age a.
      const lasting = (a: number): number => (a < point ? 1 : cycle.wait > 0 ? Math.exp(-(a - point) / cycle.wait) : 0);
      const integrated =
        (meanOver(servedUntil, (a) => stale(a) * lasting(a), 400_000) * servedUntil) / (point + cycle.wait);
      expect(staleReadShare(rate, cycle) / integrated).toBeCloseTo(1, 5);
    },
  );

  it('counts no read within the grace, λ(t - 1)²/2t for λt small, near 1 for λt large, 0 for a TTL of 0', () => {
    expect(staleReadShare(1, plain(1))).toBe(0);
    expect(staleReadShare(1e-9, plain(10)) / ((1e-9 * 81) / 20)).toBeCloseTo(1, 6);
    expect(staleReadShare(10, plain(3600))).toBeGreaterThan(0.999);
    expect(staleReadShare(1, plain(0))).toBe(0);
    expect(staleReadShare(0, plain(10))).toBe(0);
  });

  it('grows with the readers’ wait while the stale window serves it, and falls once reads outlast the window', () => {
    const cycle = { ttl: 10, staleWindow: 30, ahead: 0.1 };
    const shares = [0, 1, 5, 20].map((wait) => staleReadShare(1 / 20, { ...cycle, wait }));
    expect(shares).toEqual([...shares].sort((a, b) => a - b));
    // No stale window: a read past the TTL waits for the refresh, so a longer wait means fresher reads.
    const windowless = { ...cycle, staleWindow: 0 };
    expect(staleReadShare(1 / 20, { ...windowless, wait: 20 })).toBeLessThan(
      staleReadShare(1 / 20, { ...windowless, wait: 1 }),
    );
  });
});

/**
 * A Monte-Carlo run of one resource's pages under the read service's rules (read-service.ts,
 * background-refresher.ts, refresh-ahead.ts): each page changes as a Poisson process and is read
 * by a Poisson stream; a copy serves fresh hits until its refresh point (its key's place in the
 * last `ahead` of its TTL), the first read past it starts one refresh and is served the copy (stale
 * once past the TTL), the refreshed copy arrives REFRESH_SECONDS later, fetched by the upstream
 * half-way; a read past TTL + stale window waits for the fill. A read is stale when it misses a
 * change older than a second (the bench's judge). The refreshes give the ledger's counts.
 */
describe('the stale share estimate against a simulated resource', () => {
  const TTL = 10;
  const STALE_WINDOW = 30;
  const AHEAD = 0.1;
  const REFRESH_SECONDS = 0.05;
  const PAGES = 8;
  const READS_PER_PAGE = 25_000;

  interface Counted {
    reads: number;
    stale: number;
    refreshes: number;
    changed: number;
    heldSeconds: number;
    waitedSeconds: number;
  }

  /** The time of the first change after `t` of the ascending `changes`, Infinity for none. */
  function firstAfter(changes: readonly number[], t: number): number {
    let low = 0;
    let high = changes.length;
    while (low < high) {
      const middle = (low + high) >>> 1;
      if ((changes[middle] ?? Number.POSITIVE_INFINITY) <= t) low = middle + 1;
      else high = middle;
    }
    return changes[low] ?? Number.POSITIVE_INFINITY;
  }

  function poissonTimes(random: () => number, rate: number, horizon: number): number[] {
    const times: number[] = [];
    for (let t = -Math.log(1 - random()) / rate; t < horizon; t += -Math.log(1 - random()) / rate) times.push(t);
    return times;
  }

  function simulatePage(
    random: () => number,
    every: number,
    readsPerSecond: number,
    counted: Counted,
    horizon = READS_PER_PAGE / readsPerSecond,
  ): void {
    const changes = poissonTimes(random, 1 / every, horizon);
    const point = TTL * (1 - AHEAD * random());
    let copy = { storedAt: 0, nextChange: firstAfter(changes, 0) };
    let refresh: { readonly start: number; readonly end: number } | undefined;
    const replace = ({ start, end }: { readonly start: number; readonly end: number }): void => {
      const fetched = start + REFRESH_SECONDS / 2;
      counted.refreshes++;
      if (copy.nextChange <= fetched) counted.changed++;
      counted.heldSeconds += end - copy.storedAt;
      counted.waitedSeconds += Math.max(0, end - (copy.storedAt + point));
      copy = { storedAt: end, nextChange: firstAfter(changes, fetched) };
      refresh = undefined;
    };
    for (const t of poissonTimes(random, readsPerSecond, horizon)) {
      if (refresh !== undefined && refresh.end <= t) replace(refresh);
      counted.reads++;
      const age = t - copy.storedAt;
      if (age >= TTL + STALE_WINDOW) {
        // Past the stale window: the read joins the refresh or leads a fill, and is served its copy.
        replace(refresh ?? { start: t, end: t + REFRESH_SECONDS });
        continue;
      }
      if (age >= point && refresh === undefined) refresh = { start: t, end: t + REFRESH_SECONDS };
      if (copy.nextChange <= t - STALE_AFTER_SECONDS) counted.stale++;
    }
  }

  /** What the ledger would total of the simulated refreshes (the reads left uncounted). */
  function windowTotals(counted: Counted, fills: number): WindowTotals {
    return {
      fills,
      refreshes: counted.refreshes,
      unchanged: counted.refreshes - counted.changed,
      changed: counted.changed,
      heldSeconds: counted.heldSeconds,
      waitedSeconds: counted.waitedSeconds,
      bytes: 0,
      lastModifiedChanges: 0,
      lastModifiedSeconds: 0,
    };
  }

  function simulate(every: number, readsPerSecond: number): { simulated: number; estimated: number | null } {
    const random = seeded(every * 1_000 + Math.round(readsPerSecond * 100));
    const counted: Counted = { reads: 0, stale: 0, refreshes: 0, changed: 0, heldSeconds: 0, waitedSeconds: 0 };
    for (let page = 0; page < PAGES; page++) simulatePage(random, every, readsPerSecond, counted);
    const totals = windowTotals(counted, PAGES);
    const serving = { ttl: TTL, staleWindow: STALE_WINDOW, ahead: AHEAD };
    const advice = adviceFor('receipts', totals, serving, 5, 10);
    return { simulated: counted.stale / counted.reads, estimated: advice.staleShareEstimate };
  }

  /** Pages read at the rates given over one span, as a Zipf of reads spreads them: all in one total. */
  function simulateMixed(every: number, rates: readonly number[]): { simulated: number; totals: WindowTotals } {
    const random = seeded(every * 7_919);
    const counted: Counted = { reads: 0, stale: 0, refreshes: 0, changed: 0, heldSeconds: 0, waitedSeconds: 0 };
    for (const rate of rates) simulatePage(random, every, rate, counted, 20_000);
    const totals = windowTotals(counted, rates.length);
    return { simulated: counted.stale / counted.reads, totals: { ...totals, reads: counted.reads } };
  }

  it.each([5, 20, 60])(
    'weighs the wait by reads when they are counted: within 25% under a Zipf of reads, a change every %i s',
    (every) => {
      // Zipf over 60 pages: the k-th read 4/k times a second, down to one read every 15 s.
      const rates = Array.from({ length: 60 }, (_, k) => 4 / (k + 1));
      const { simulated, totals } = simulateMixed(every, rates);
      const serving = { ttl: TTL, staleWindow: STALE_WINDOW, ahead: AHEAD };
      const weighed = adviceFor('receipts', totals, serving, 5, 10).staleShareEstimate ?? 0;
      const perRefresh = adviceFor('receipts', { ...totals, reads: undefined }, serving, 5, 10).staleShareEstimate ?? 0;
      expect(weighed / simulated).toBeGreaterThan(0.75);
      expect(weighed / simulated).toBeLessThan(1.25);
      expect(Math.abs(weighed / simulated - 1)).toBeLessThan(Math.abs(perRefresh / simulated - 1));
    },
  );

  it.each([
    { every: 5, readsPerSecond: 4 },
    { every: 20, readsPerSecond: 4 },
    { every: 60, readsPerSecond: 4 },
    { every: 5, readsPerSecond: 0.25 },
    { every: 20, readsPerSecond: 0.25 },
    { every: 60, readsPerSecond: 0.25 },
    { every: 5, readsPerSecond: 0.1 },
    { every: 20, readsPerSecond: 0.1 },
    { every: 60, readsPerSecond: 0.1 },
  ])(
    'is within 25% of the stale share readers get: a change every $every s, $readsPerSecond reads/s a page',
    ({ every, readsPerSecond }) => {
      const { simulated, estimated } = simulate(every, readsPerSecond);
      expect(estimated).not.toBeNull();
      expect((estimated ?? 0) / simulated).toBeGreaterThan(0.75);
      expect((estimated ?? 0) / simulated).toBeLessThan(1.25);
    },
  );
});

describe('expectedStaleness', () => {
  it('is t/2 - 1/λ + (1 - e^{-λt}) / (λ²t): a change every 10 s, a TTL of 20 s', () => {
    expect(expectedStaleness(0.1, 20)).toBeCloseTo(10 - 10 + (1 - Math.exp(-2)) / (0.01 * 20), 10);
    expect(expectedStaleness(0.1, 20)).toBeCloseTo(4.323324, 6);
  });

  it.each([
    [1 / 3600, 30],
    [1 / 60, 30],
    [0.5, 10],
    [1e-4, 50],
  ])('is the mean over the copy’s life of how long the read has been stale (λ %d, t %d)', (rate, ttl) => {
    // A read at u is stale since the first change s < u: E[u - s; s < u] = u - (1 - e^{-λu}) / λ.
    const integrated = meanOver(ttl, (u) => u + Math.expm1(-rate * u) / rate);
    expect(expectedStaleness(rate, ttl) / integrated).toBeCloseTo(1, 5);
  });

  it('is about λt²/6 for λt small, joining the closed form where the series hands over', () => {
    expect(expectedStaleness(1e-6, 10) / ((1e-6 * 100) / 6)).toBeCloseTo(1, 5);
    const below = expectedStaleness(1, 0.00999999);
    const above = expectedStaleness(1, 0.01);
    expect(above / below).toBeCloseTo(1, 5);
  });
});

describe('suggestedTtl', () => {
  it.each([
    { rate: 1 / 60, target: 5 },
    { rate: 1 / 600, target: 5 },
    { rate: 1 / 10, target: 2 },
    { rate: 0.011, target: 5 },
    { rate: 1 / 3600, target: 30 },
  ])('is the longest whole second meeting the target (λ $rate, target $target s)', ({ rate, target }) => {
    const ttl = suggestedTtl(rate, target);
    expect(Number.isInteger(ttl)).toBe(true);
    expect(expectedStaleness(rate, ttl)).toBeLessThanOrEqual(target);
    expect(expectedStaleness(rate, ttl + 1)).toBeGreaterThan(target);
  });

  it('gives a page that changes every minute 46 s for a target of 5 s', () => {
    // E(46) = 4.90 s, E(47) = 5.10 s. λt²/6 alone would say √(6·5·60) = 42 s: near λt = 1 the
    // expected staleness grows slower than its first term.
    expect(suggestedTtl(1 / 60, 5)).toBe(46);
  });

  it('grows as changes grow rarer, and as the target loosens', () => {
    expect(suggestedTtl(1 / 600, 5)).toBeGreaterThan(suggestedTtl(1 / 60, 5));
    expect(suggestedTtl(1 / 60, 20)).toBeGreaterThan(suggestedTtl(1 / 60, 5));
  });

  it('is clamped to [1, 86400]', () => {
    expect(suggestedTtl(1000, 0.001)).toBe(MIN_SUGGESTED_TTL);
    expect(suggestedTtl(1e-9, 5)).toBe(MAX_SUGGESTED_TTL);
    expect(suggestedTtl(1 / 60, 86_400)).toBe(MAX_SUGGESTED_TTL);
    expect(suggestedTtl(0, 5)).toBe(MAX_SUGGESTED_TTL);
  });
});

describe('adviceFor', () => {
  const totals = (fields: Partial<WindowTotals>): WindowTotals => ({
    fills: 0,
    refreshes: 0,
    unchanged: 0,
    changed: 0,
    heldSeconds: 0,
    waitedSeconds: 0,
    bytes: 0,
    lastModifiedChanges: 0,
    lastModifiedSeconds: 0,
    ...fields,
  });
  /** 30 s fresh, 30 s of stale-while-revalidate, refreshed in the last tenth. */
  const serving = { ttl: 30, staleWindow: 30, ahead: 0.1 };

  it('gives rates per minute, shares of the refreshes and the model’s figures under the policy in force', () => {
    const advice = adviceFor(
      'receipts',
      totals({
        fills: 4,
        refreshes: 10,
        unchanged: 8,
        changed: 2,
        heldSeconds: 300,
        waitedSeconds: 15,
        bytes: 60_000,
        lastModifiedChanges: 2,
        lastModifiedSeconds: 90,
      }),
      serving,
      5,
      2,
    );
    const rate = Math.log(10.5 / 8.5) / 30;
    expect(advice).toMatchObject({
      resource: 'receipts',
      ttlSeconds: 30,
      refreshesPerMinute: 5,
      fillsPerMinute: 2,
      unchangedShare: 0.8,
      upstreamBytesPerMinute: 30_000,
      refreshWaitSeconds: 1.5,
      suggestedTtlSeconds: suggestedTtl(rate, 5),
      lastModifiedIntervalSeconds: 45,
      note: null,
    });
    expect(advice.changeIntervalSeconds).toBeCloseTo(1 / rate, 9);
    expect(advice.staleShareEstimate).toBeCloseTo(staleReadShare(rate, { ...serving, wait: 1.5 }), 12);
  });

  it('says when no refresh was seen: nothing to judge', () => {
    expect(adviceFor('receipts', totals({ fills: 3, bytes: 10 }), serving, 5, 1)).toMatchObject({
      unchangedShare: null,
      changeIntervalSeconds: null,
      refreshWaitSeconds: null,
      staleShareEstimate: null,
      suggestedTtlSeconds: null,
      lastModifiedIntervalSeconds: null,
      note: NO_REFRESH_NOTE,
    });
  });

  it('says when no refresh found a change: the TTL can grow, and nothing is served stale', () => {
    expect(
      adviceFor('receipts', totals({ refreshes: 5, unchanged: 5, heldSeconds: 150 }), serving, 5, 1),
    ).toMatchObject({
      unchangedShare: 1,
      changeIntervalSeconds: null,
      staleShareEstimate: 0,
      suggestedTtlSeconds: null,
      note: NO_CHANGE_NOTE,
    });
  });

  it('says when every refresh found a change: the interval is an upper bound', () => {
    const advice = adviceFor('receipts', totals({ refreshes: 5, changed: 5, heldSeconds: 150 }), serving, 5, 1);
    expect(advice.note).toBe(ALWAYS_CHANGED_NOTE);
    expect(advice.changeIntervalSeconds).toBeLessThan(30);
  });
});
