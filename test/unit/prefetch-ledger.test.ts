/** The prefetches' ledger (src/cache/prefetch/prefetch-ledger.ts): the caps in flight, and pages it lets go. */
import { describe, expect, it } from 'vitest';
import type { CacheAddress } from '../../src/cache/entry/cache-key.js';
import { PrefetchLedger } from '../../src/cache/prefetch/prefetch-ledger.js';

const address = (key: string): CacheAddress => ({
  group: { company: '1', resource: 'receipts' },
  tag: '{1:receipts}',
  key,
  generationKey: `gen-${key}`,
  leaseKey: `lease-${key}`,
  markKeys: [],
});

describe('PrefetchLedger', () => {
  it('holds the cap per company and per replica, and frees both at the end', () => {
    const ledger = new PrefetchLedger({ maxInFlight: 2, maxPerCompany: 1 });
    expect(ledger.tryStart('1')).toBe(true);
    expect(ledger.tryStart('1')).toBe(false);
    expect(ledger.tryStart('2')).toBe(true);
    expect(ledger.tryStart('3')).toBe(false);
    ledger.end('1');
    expect(ledger.inFlight).toBe(1);
    expect(ledger.tryStart('3')).toBe(true);
    expect(ledger.tryStart('1')).toBe(false);
  });

  it('lets go of a page fetched ahead once it expires, at most one sweep a second', () => {
    const ledger = new PrefetchLedger({ maxInFlight: 1, maxPerCompany: 1 });
    expect(ledger.waiting).toBe(false);
    ledger.fetched(address('a'), 5_000);
    ledger.fetched(address('b'), 10_000);
    expect(ledger.waiting).toBe(true);
    expect(ledger.sweep(6_000).map((page) => page.key)).toEqual(['a']);
    expect(ledger.sweep(6_500)).toEqual([]); // within the second: not swept again
    expect(ledger.sweep(9_000)).toEqual([]); // 'b' still fresh
    expect(ledger.sweep(11_000).map((page) => page.key)).toEqual(['b']);
    expect(ledger.waiting).toBe(false);
  });

  it('pushes the oldest out past its bound, and a page fetched again is remembered once', () => {
    const ledger = new PrefetchLedger({ maxInFlight: 1, maxPerCompany: 1, maxWaiting: 2 });
    expect(ledger.fetched(address('a'), 5_000)).toEqual([]);
    expect(ledger.fetched(address('b'), 5_000)).toEqual([]);
    expect(ledger.fetched(address('a'), 6_000)).toEqual([]); // again: moved to the newest
    expect(ledger.fetched(address('c'), 7_000).map((page) => page.key)).toEqual(['b']);
    expect(ledger.sweep(20_000).map((page) => page.key)).toEqual(['a', 'c']);
  });

  it('refuses caps that are not positive integers, naming the setting', () => {
    expect(() => new PrefetchLedger({ maxInFlight: 0, maxPerCompany: 1 })).toThrow(/cache\.prefetch\.maxConcurrent/);
    expect(() => new PrefetchLedger({ maxInFlight: 1, maxPerCompany: 1.5 })).toThrow(/cache\.prefetch\.maxPerCompany/);
  });
});
