/**
 * The freshness ledger (docs/cache.md#freshness-advice): each fill's outcome counted in its
 * resource's bucket of the minute it was answered; the window the last ten one-minute buckets, its
 * buckets rolling over on an injected clock; memory bounded by the catalog's resources times the
 * window's minutes, however many pages and minutes go by; the upstream's bytes counted for the
 * metrics as they come.
 */
import { describe, expect, it } from 'vitest';
import { type CacheAddress, cacheAddress } from '../../src/cache/entry/cache-key.js';
import type { CacheEntry } from '../../src/cache/entry/entry.js';
import {
  changeRate,
  NO_CHANGE_NOTE,
  NO_REFRESH_NOTE,
  staleReadShare,
} from '../../src/cache/freshness/freshness-advice.js';
import { FreshnessLedger, WINDOW_MINUTES } from '../../src/cache/freshness/freshness-ledger.js';
import type { FillObservation } from '../../src/cache/read/fill-result.js';
import { refreshAheadAt } from '../../src/cache/read/refresh-ahead.js';
import { RESOURCE_NAMES } from '../../src/catalog/resources.js';
import { ProxyError } from '../../src/errors/proxy-error.js';
import { canonicaliseTarget } from '../helpers/canonicalise.js';
import { storedEntry } from '../helpers/entries.js';
import { testPrincipal } from '../helpers/principals.js';

const MINUTE = 60_000;
/** A minute boundary, so that offsets from it name the minute they fall in. */
const START = 1_800_000_000_000 - (1_800_000_000_000 % MINUTE);
const TTL = 30;
const ttlOf = (): number => TTL;

function address(target: string): CacheAddress {
  const read = canonicaliseTarget(`/api/slab/v1/operations/${target}`);
  if (read instanceof ProxyError) throw new Error(read.code);
  return cacheAddress('test', read, testPrincipal(), 'company');
}

function held(storedAt: number, lastModified?: string): CacheEntry {
  return storedEntry(storedAt, {
    etag: '"held"',
    freshUntil: storedAt + TTL * 1000,
    generation: '1',
    ...(lastModified !== undefined && { lastModified }),
  });
}

/** A first fill at `at` of `bytes`. */
function filled(target: string, at: number, bytes = 1000): FillObservation {
  return { address: address(target), outcome: 'filled', previous: undefined, lastModified: undefined, bytes, at };
}

/** A refresh at `at` of a copy stored `heldMs` before. */
function refreshed(
  target: string,
  at: number,
  outcome: 'not_modified' | 'identical' | 'modified',
  heldMs: number,
  fields: { bytes?: number; lastModified?: string; heldLastModified?: string } = {},
): FillObservation {
  return {
    address: address(target),
    outcome,
    previous: held(at - heldMs, fields.heldLastModified),
    lastModified: fields.lastModified,
    bytes: fields.bytes ?? (outcome === 'not_modified' ? 0 : 1000),
    at,
  };
}

describe('the freshness ledger', () => {
  it('counts first fills, unchanged and changed refreshes, held time and bytes', () => {
    const ledger = new FreshnessLedger({ now: () => START });
    ledger.observe(filled('receipts?per_page=1', START + 1_000, 2_000));
    ledger.observe(refreshed('receipts?per_page=1', START + 31_000, 'not_modified', 30_000));
    ledger.observe(refreshed('receipts?per_page=2', START + 32_000, 'identical', 40_000, { bytes: 500 }));
    ledger.observe(refreshed('receipts?per_page=3', START + 33_000, 'modified', 50_000, { bytes: 700 }));
    const advice = ledger.advice(5, ttlOf, START + 59_000);
    expect(advice.windowSeconds).toBe(60);
    expect(advice.targetSeconds).toBe(5);
    expect(advice.resources).toHaveLength(1);
    const [receipts] = advice.resources;
    expect(receipts).toMatchObject({
      resource: 'receipts',
      ttlSeconds: TTL,
      fillsPerMinute: 1,
      refreshesPerMinute: 3,
      upstreamBytesPerMinute: 3_200,
      note: null,
    });
    expect(receipts?.unchangedShare).toBeCloseTo(2 / 3, 12);
    const rate = changeRate({ refreshes: 3, changed: 1, heldSeconds: 120 }) ?? 0;
    expect(receipts?.changeIntervalSeconds).toBeCloseTo(1 / rate, 9);
  });

  it('measures how long refreshed copies outlived their refresh point, and judges the stale share by it', () => {
    // Copies of a 30 s TTL refreshed 34 s and 40 s after they were stored: 4 s and 10 s past the TTL.
    const plain = new FreshnessLedger({ now: () => START, staleWindowOf: () => 20 });
    plain.observe(refreshed('receipts?per_page=1', START + 34_000, 'modified', 34_000));
    plain.observe(refreshed('receipts?per_page=2', START + 40_000, 'not_modified', 40_000));
    const [receipts] = plain.advice(5, ttlOf, START + 50_000).resources;
    expect(receipts?.refreshWaitSeconds).toBe(7);
    const rate = changeRate({ refreshes: 2, changed: 1, heldSeconds: 74 }) ?? 0;
    const cycle = { ttl: TTL, staleWindow: 20, ahead: 0, wait: 7 };
    expect(receipts?.staleShareEstimate).toBeCloseTo(staleReadShare(rate, cycle), 12);
    // Refreshed ahead: the wait counts from each copy's own point in the last fifth of its TTL.
    const ahead = new FreshnessLedger({ now: () => START, refreshAhead: 0.2 });
    const observation = refreshed('receipts?per_page=1', START + 29_000, 'not_modified', 29_000);
    ahead.observe(observation);
    const point = refreshAheadAt(observation.address.key, START, START + TTL * 1000, 0.2);
    expect(point).toBeLessThan(START + 29_000);
    const [early] = ahead.advice(5, ttlOf, START + 50_000).resources;
    expect(early?.refreshWaitSeconds).toBeCloseTo((START + 29_000 - point) / 1000, 9);
  });

  it('weighs the wait by the reads since its window’s first fill when the reads are counted', () => {
    let reads = 1_000;
    const ledger = new FreshnessLedger({ now: () => START, readsOf: () => reads });
    // Two copies held 34 s and 40 s (waits of 4 and 10 s past a 30 s TTL), read 37 times in all.
    ledger.observe(refreshed('receipts?per_page=1', START + 34_000, 'modified', 34_000));
    reads += 37;
    ledger.observe(refreshed('receipts?per_page=2', START + 40_000, 'not_modified', 40_000));
    const [receipts] = ledger.advice(5, ttlOf, START + 50_000).resources;
    // 74 s held over 37 reads: 2 s between a page's reads, less than the 7 s mean per refresh.
    expect(receipts?.refreshWaitSeconds).toBe(2);
    // Never more than the mean per refresh: with fewer reads than that, the refreshes' mean.
    reads = 1_001;
    expect(ledger.advice(5, ttlOf, START + 50_000).resources[0]?.refreshWaitSeconds).toBe(7);
  });

  it('lists only resources with fills in the window, in catalog order, each with its own TTL', () => {
    const ledger = new FreshnessLedger({ now: () => START });
    ledger.observe(filled('warehouses?per_page=1', START));
    ledger.observe(filled('receipts?per_page=1', START));
    const advice = ledger.advice(5, (resource) => (resource === 'warehouses' ? 300 : 10), START + 1_000);
    const listed = advice.resources.map((r) => r.resource);
    expect(listed).toEqual(RESOURCE_NAMES.filter((name) => name === 'receipts' || name === 'warehouses'));
    expect(advice.resources.map((r) => r.ttlSeconds)).toEqual(listed.map((name) => (name === 'warehouses' ? 300 : 10)));
    expect(advice.resources.every((r) => r.note === NO_REFRESH_NOTE)).toBe(true);
  });

  it('keeps the last ten minutes: a minute leaves the window as the eleventh begins', () => {
    const ledger = new FreshnessLedger({ now: () => START });
    ledger.observe(refreshed('receipts?per_page=1', START + 5_000, 'modified', 30_000));
    ledger.observe(refreshed('receipts?per_page=1', START + MINUTE + 5_000, 'not_modified', 30_000));
    const within = ledger.advice(5, ttlOf, START + (WINDOW_MINUTES - 1) * MINUTE + 59_000);
    expect(within.windowSeconds).toBe(WINDOW_MINUTES * 60 - 1);
    expect(within.resources[0]?.unchangedShare).toBe(0.5);
    expect(within.resources[0]?.refreshesPerMinute).toBeCloseTo(2 / (within.windowSeconds / 60), 12);
    // The first minute has gone: only the unchanged refresh is left.
    const later = ledger.advice(5, ttlOf, START + WINDOW_MINUTES * MINUTE);
    expect(later.windowSeconds).toBe((WINDOW_MINUTES - 1) * 60);
    expect(later.resources[0]).toMatchObject({ unchangedShare: 1, changeIntervalSeconds: null, note: NO_CHANGE_NOTE });
    expect(ledger.advice(5, ttlOf, START + (WINDOW_MINUTES + 1) * MINUTE).resources).toEqual([]);
  });

  it('reuses a bucket once its minute has left the window, and drops a fill older than the window', () => {
    const ledger = new FreshnessLedger({ now: () => START });
    ledger.observe(filled('receipts?per_page=1', START));
    // Same slot of the ring, ten minutes on: the old minute is emptied first.
    ledger.observe(filled('receipts?per_page=1', START + WINDOW_MINUTES * MINUTE, 10));
    // Answered in the first minute but reported now: that minute is no longer in the window.
    ledger.observe(filled('receipts?per_page=1', START + 1_000, 99_999));
    const advice = ledger.advice(5, ttlOf, START + WINDOW_MINUTES * MINUTE + 30_000);
    expect(advice.resources[0]?.upstreamBytesPerMinute).toBeCloseTo((10 * 60) / advice.windowSeconds, 12);
    expect(advice.resources[0]?.fillsPerMinute).toBeCloseTo(60 / advice.windowSeconds, 12);
  });

  it('holds at most resources × window buckets, whatever the pages and minutes', () => {
    const ledger = new FreshnessLedger({ now: () => START });
    for (let minute = 0; minute < 120; minute++)
      for (const resource of RESOURCE_NAMES)
        for (let page = 1; page <= 20; page++)
          ledger.observe(refreshed(`${resource}?per_page=${String(page)}`, START + minute * MINUTE, 'modified', 1_000));
    expect(ledger.bucketsHeld).toBe(RESOURCE_NAMES.length * WINDOW_MINUTES);
    const advice = ledger.advice(5, ttlOf, START + 119 * MINUTE + 59_000);
    expect(advice.resources).toHaveLength(RESOURCE_NAMES.length);
    for (const resource of advice.resources) expect(resource.refreshesPerMinute).toBeCloseTo(20, 1);
  });

  it('takes the mean gap between distinct Last-Modified values of the same page', () => {
    const ledger = new FreshnessLedger({ now: () => START });
    const lastModified = (seconds: number): string => new Date(1_700_000_000_000 + seconds * 1000).toUTCString();
    ledger.observe(
      refreshed('receipts?per_page=1', START + 1_000, 'modified', 30_000, {
        heldLastModified: lastModified(0),
        lastModified: lastModified(120),
      }),
    );
    ledger.observe(
      refreshed('receipts?per_page=2', START + 2_000, 'modified', 30_000, {
        heldLastModified: lastModified(0),
        lastModified: lastModified(60),
      }),
    );
    // The same value, a missing one, an unreadable one: no gap.
    ledger.observe(
      refreshed('receipts?per_page=3', START + 3_000, 'not_modified', 30_000, {
        heldLastModified: lastModified(5),
        lastModified: lastModified(5),
      }),
    );
    ledger.observe(
      refreshed('receipts?per_page=4', START + 4_000, 'modified', 30_000, { lastModified: lastModified(9) }),
    );
    ledger.observe(
      refreshed('receipts?per_page=5', START + 5_000, 'modified', 30_000, {
        heldLastModified: 'yesterday',
        lastModified: lastModified(9),
      }),
    );
    expect(ledger.advice(5, ttlOf, START + 6_000).resources[0]?.lastModifiedIntervalSeconds).toBe(90);
  });

  it('counts the per-minute figures over a minute at least while the replica is new', () => {
    const ledger = new FreshnessLedger({ now: () => START + 30_000 });
    ledger.observe(filled('receipts?per_page=1', START + 31_000));
    ledger.observe(filled('receipts?per_page=2', START + 32_000));
    const early = ledger.advice(5, ttlOf, START + 35_000);
    expect(early.windowSeconds).toBe(60);
    expect(early.resources[0]?.fillsPerMinute).toBe(2);
    // Past a minute: the span since the start.
    expect(ledger.advice(5, ttlOf, START + 30_000 + 120_000).windowSeconds).toBe(120);
  });

  it("tells the metrics the upstream's bytes of every fill, by resource", () => {
    const counted: Array<[string, number]> = [];
    const ledger = new FreshnessLedger({
      now: () => START,
      metrics: { upstreamFillBytes: (resource, bytes) => counted.push([resource, bytes]) },
    });
    ledger.observe(filled('receipts?per_page=1', START, 1234));
    ledger.observe(refreshed('movements?per_page=1', START, 'not_modified', 1_000));
    expect(counted).toEqual([
      ['receipts', 1234],
      ['movements', 0],
    ]);
  });
});
