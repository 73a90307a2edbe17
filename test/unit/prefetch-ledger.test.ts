/** The prefetches' ledger (src/cache/prefetch-ledger.ts): the caps in flight, and pages used or wasted. */
import { describe, expect, it } from 'vitest';
import { PrefetchLedger } from '../../src/cache/prefetch-ledger.js';

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

  it('counts a page fetched ahead once: used while fresh, wasted once expired, nothing for others', () => {
    const ledger = new PrefetchLedger({ maxInFlight: 1, maxPerCompany: 1 });
    ledger.fetched('a', 1_000);
    ledger.fetched('b', 1_000);
    expect(ledger.take('a', 999)).toBe('used');
    expect(ledger.take('a', 999)).toBeUndefined();
    expect(ledger.take('b', 1_000)).toBe('wasted');
    expect(ledger.take('c', 0)).toBeUndefined();
  });

  it('sweeps the expired untaken at most once a second, and pushes the oldest out past its bound', () => {
    const ledger = new PrefetchLedger({ maxInFlight: 1, maxPerCompany: 1, maxWaiting: 2 });
    ledger.fetched('a', 5_000);
    ledger.fetched('b', 10_000);
    expect(ledger.sweep(6_000)).toBe(1);
    expect(ledger.sweep(6_500)).toBe(0); // within the second: not swept again
    expect(ledger.fetched('c', 20_000)).toBe(0);
    expect(ledger.fetched('d', 20_000)).toBe(1); // 'b' pushed out
    expect(ledger.take('b', 7_000)).toBeUndefined();
    expect(ledger.take('c', 7_000)).toBe('used');
  });

  it('refuses caps that are not positive integers, naming the setting', () => {
    expect(() => new PrefetchLedger({ maxInFlight: 0, maxPerCompany: 1 })).toThrow(/cache\.prefetch\.maxConcurrent/);
    expect(() => new PrefetchLedger({ maxInFlight: 1, maxPerCompany: 1.5 })).toThrow(/cache\.prefetch\.maxPerCompany/);
  });
});
