/**
 * The model behind the freshness advice (docs/cache.md#freshness-advice): the change-rate
 * estimator recovers a known Poisson rate from simulated refreshes; the stale share and the
 * expected staleness of a read match their definitions integrated numerically and known values;
 * the suggested TTL is the longest whole second that meets the target, clamped to [1, 86400];
 * a resource's figures are null, with a note, where nothing is known.
 */
import { describe, expect, it } from 'vitest';
import {
  ALWAYS_CHANGED_NOTE,
  adviceFor,
  changeRate,
  expectedStaleness,
  MAX_SUGGESTED_TTL,
  MIN_SUGGESTED_TTL,
  NO_CHANGE_NOTE,
  NO_REFRESH_NOTE,
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
  it('is 1 - (1 - e^{-λt}) / (λt): a change every minute, a TTL of 30 s', () => {
    expect(staleReadShare(1 / 60, 30)).toBeCloseTo(1 - (1 - Math.exp(-0.5)) / 0.5, 12);
    expect(staleReadShare(1 / 60, 30)).toBeCloseTo(0.213061, 6);
  });

  it.each([
    [1 / 3600, 30],
    [1 / 60, 30],
    [0.5, 10],
    [2, 300],
  ])('is the mean over the copy’s life of the chance a change came (λ %d, t %d)', (rate, ttl) => {
    const integrated = meanOver(ttl, (u) => 1 - Math.exp(-rate * u));
    expect(staleReadShare(rate, ttl)).toBeCloseTo(integrated, 6);
  });

  it('is about λt/2 for λt small, near 1 for λt large, 0 for a TTL of 0', () => {
    expect(staleReadShare(1e-9, 10) / 5e-9).toBeCloseTo(1, 6);
    expect(staleReadShare(1e-3, 1e-3)).toBeCloseTo(5e-7, 12);
    expect(staleReadShare(10, 3600)).toBeGreaterThan(0.999);
    expect(staleReadShare(1, 0)).toBe(0);
  });
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
    bytes: 0,
    lastModifiedChanges: 0,
    lastModifiedSeconds: 0,
    ...fields,
  });

  it('gives rates per minute, shares of the refreshes and the model’s figures at the TTL in force', () => {
    const advice = adviceFor(
      'receipts',
      totals({
        fills: 4,
        refreshes: 10,
        unchanged: 8,
        changed: 2,
        heldSeconds: 300,
        bytes: 60_000,
        lastModifiedChanges: 2,
        lastModifiedSeconds: 90,
      }),
      30,
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
      suggestedTtlSeconds: suggestedTtl(rate, 5),
      lastModifiedIntervalSeconds: 45,
      note: null,
    });
    expect(advice.changeIntervalSeconds).toBeCloseTo(1 / rate, 9);
    expect(advice.staleShareEstimate).toBeCloseTo(staleReadShare(rate, 30), 12);
  });

  it('says when no refresh was seen: nothing to judge', () => {
    expect(adviceFor('receipts', totals({ fills: 3, bytes: 10 }), 30, 5, 1)).toMatchObject({
      unchangedShare: null,
      changeIntervalSeconds: null,
      staleShareEstimate: null,
      suggestedTtlSeconds: null,
      lastModifiedIntervalSeconds: null,
      note: NO_REFRESH_NOTE,
    });
  });

  it('says when no refresh found a change: the TTL can grow, and nothing is served stale', () => {
    expect(adviceFor('receipts', totals({ refreshes: 5, unchanged: 5, heldSeconds: 150 }), 30, 5, 1)).toMatchObject({
      unchangedShare: 1,
      changeIntervalSeconds: null,
      staleShareEstimate: 0,
      suggestedTtlSeconds: null,
      note: NO_CHANGE_NOTE,
    });
  });

  it('says when every refresh found a change: the interval is an upper bound', () => {
    const advice = adviceFor('receipts', totals({ refreshes: 5, changed: 5, heldSeconds: 150 }), 30, 5, 1);
    expect(advice.note).toBe(ALWAYS_CHANGED_NOTE);
    expect(advice.changeIntervalSeconds).toBeLessThan(30);
  });
});
