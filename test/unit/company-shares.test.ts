/**
 * What each company holds of an in-process tier (src/cache/stores/company-shares.ts): the ledger always
 * equals the bytes the tier holds by company, whatever was set, read, deleted or let go; a company
 * is over its share only beside others; and under pressure a company over its share takes no new
 * room in the L1 or the in-process store, even on a second offer.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { cacheAddress, companyOfKey } from '../../src/cache/entry/cache-key.js';
import { type CacheEntry, entryBytes } from '../../src/cache/entry/entry.js';
import { CompanyShares } from '../../src/cache/stores/company-shares.js';
import { L1Cache } from '../../src/cache/stores/l1.js';
import { createMemoryStore } from '../../src/cache/stores/memory-store.js';
import { ProxyError } from '../../src/errors/proxy-error.js';
import { RecentMap } from '../../src/platform/recent-map.js';
import { canonicaliseTarget } from '../helpers/canonicalise.js';
import { testPrincipal } from '../helpers/principals.js';

function key(company: string, n: number): string {
  return `slab:{${company}:receipts}:co:list:per_page=${String(n)}`;
}

describe('companyOfKey', () => {
  it('reads the company of an entry key, and nothing of another shape', () => {
    const read = canonicaliseTarget('/api/slab/v1/operations/receipts?per_page=3');
    if (read instanceof ProxyError) throw new Error(read.code);
    const address = cacheAddress('slab', read, testPrincipal({ company: 'acme_1' }), 'company');
    expect(companyOfKey(address.key)).toBe('acme_1');
    expect(companyOfKey('slab:fills')).toBeUndefined();
    expect(companyOfKey('slab:{open')).toBeUndefined();
  });
});

describe('CompanyShares', () => {
  it('is over its share only beside other companies holding more than an equal split', () => {
    const shares = new CompanyShares();
    shares.held(key('a', 1), 900);
    expect(shares.overShare(key('a', 2), 1_000)).toBe(false); // alone: the whole tier is its share
    shares.held(key('b', 1), 100);
    expect(shares.overShare(key('a', 2), 1_000)).toBe(true); // 900 of 1,000 beside one other
    expect(shares.overShare(key('b', 2), 1_000)).toBe(false);
    expect(shares.overShare(key('c', 1), 1_000)).toBe(false); // holding nothing
    shares.held(key('a', 1), -900);
    expect([...shares.byCompany()]).toEqual([['b', 100]]);
  });

  it('equals what a RecentMap holds by company after any sets, reads and deletes (generations let go included)', () => {
    fc.assert(
      fc.property(
        fc.array(
          fc.tuple(
            fc.constantFrom('get', 'set', 'delete'),
            fc.constantFrom('a', 'b', 'c'),
            fc.integer({ min: 0, max: 12 }),
            fc.integer({ min: 1, max: 40 }),
          ),
          { maxLength: 300 },
        ),
        (operations) => {
          const shares = new CompanyShares();
          const map = new RecentMap<string, number>({
            maxSize: 200,
            sizeOf: (size) => size,
            onHeld: (held, size) => shares.held(held, size),
          });
          const keys = new Set<string>();
          for (const [operation, company, n, size] of operations) {
            const k = key(company, n);
            keys.add(k);
            if (operation === 'get') map.get(k);
            else if (operation === 'set') map.set(k, size);
            else map.delete(k);
          }
          const expected = new Map<string, number>();
          for (const k of keys) {
            if (!map.has(k)) continue;
            const company = companyOfKey(k) ?? '';
            expected.set(company, (expected.get(company) ?? 0) + (map.get(k) ?? 0));
          }
          expect(new Map(shares.byCompany())).toEqual(expected);
        },
      ),
    );
  });
});

const PAGE: CacheEntry = {
  status: 200,
  contentType: 'application/json',
  etag: '"p"',
  body: Buffer.alloc(2_000, 120),
  storedAt: 0,
  freshUntil: 1_000_000,
  keepUntil: 1_000_000,
  generation: 'g',
};

describe('under pressure, a company over its share', () => {
  it("lets no generation of the L1 go for it, even on a second offer: another company's pages stay", () => {
    const l1 = new L1Cache({ maxBytes: 40_000, ttlMs: 60_000, clock: { now: () => 0 } });
    // A fills the tier alone (work-conserving: no share applies while it is the only company).
    for (let n = 0; n < 40; n++) l1.set(key('a', n), PAGE);
    expect(l1.bytesByCompany().get('a')).toBeGreaterThan(30_000);
    l1.set(key('b', 0), PAGE);
    l1.set(key('b', 0), PAGE); // B's second offer: admitted
    const b = l1.bytesByCompany().get('b') ?? 0;
    expect(b).toBeGreaterThan(0);
    for (let n = 100; n < 200; n++) {
      l1.set(key('a', n), PAGE);
      l1.set(key('a', n), PAGE); // offered twice: the doorkeeper alone would admit it
    }
    // B's page, not read since, is still held: A's pages never turned a generation over it.
    expect(l1.bytesByCompany().get('b')).toBe(b);
    expect(l1.latest(key('b', 0), '{b:receipts}')).toBeUndefined(); // no generation seen: not served
    l1.noteGeneration('{b:receipts}', 'g');
    expect(l1.latest(key('b', 0), '{b:receipts}')).toBe(PAGE);
  });

  it('takes no new room in the in-process store, even on a second offer', async () => {
    const store = createMemoryStore({ maxBytes: 40_000, now: () => 0 });
    const address = (company: string, n: number) => {
      const read = canonicaliseTarget(`/api/slab/v1/operations/receipts?per_page=${String(n)}`);
      if (read instanceof ProxyError) throw new Error(read.code);
      return cacheAddress('slab', read, testPrincipal({ company }), 'company');
    };
    const entry = PAGE;
    const size = entryBytes(entry);
    for (let n = 1; n <= 30; n++) await store.save(address('a', n), entry);
    expect(await store.save(address('b', 1), entry)).toBe(false); // first offer under pressure
    expect(await store.save(address('b', 1), entry)).toBe(true); // second: B holds less than its share
    const a = store.bytesByCompany?.().get('a') ?? 0;
    expect(a * 2).toBeGreaterThan(40_000);
    for (let n = 31; n <= 40; n++) {
      await store.save(address('a', n), entry);
      expect(await store.save(address('a', n), entry)).toBe(false);
    }
    expect(store.bytesByCompany?.().get('b')).toBeGreaterThan(size);
  });
});
