/**
 * The bounded memo map of the hit path (src/platform/recent-map.ts): what is used stays, what was
 * not used for a whole generation goes, and it never holds more than two generations.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { RecentMap } from '../../src/platform/recent-map.js';

describe('RecentMap', () => {
  it('keeps what is used and lets go of what was not used for a whole generation', () => {
    const map = new RecentMap<string, number>(3);
    for (const [i, key] of ['a', 'b', 'c'].entries()) map.set(key, i);
    map.set('d', 3); // the first generation (a, b, c) becomes the older one
    expect(map.get('a')).toBe(0); // used: moved into the current generation (d, a)
    map.set('e', 4); // current: d, a, e
    map.set('f', 5); // full: (d, a, e) older; b and c, unused for a generation, are gone
    expect(map.get('b')).toBeUndefined();
    expect(map.get('c')).toBeUndefined();
    expect([map.get('a'), map.get('d'), map.get('e'), map.get('f')]).toEqual([0, 3, 4, 5]);
  });

  it('holds at most two generations, and answers the last value set for any key it holds', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 8 }),
        fc.array(fc.tuple(fc.constantFrom('get', 'set', 'delete'), fc.integer({ min: 0, max: 20 })), {
          maxLength: 200,
        }),
        (maxSize, operations) => {
          const map = new RecentMap<number, number>(maxSize);
          const last = new Map<number, number>();
          let version = 0;
          for (const [operation, key] of operations) {
            if (operation === 'set') {
              version += 1;
              map.set(key, version);
              last.set(key, version);
              expect(map.get(key)).toBe(version); // what was just set is held
            } else if (operation === 'delete') {
              map.delete(key);
              last.delete(key);
            } else {
              const value = map.get(key);
              // Forgetting is allowed; a wrong or resurrected value is not.
              if (value !== undefined) expect(value).toBe(last.get(key));
            }
            expect(map.size).toBeLessThanOrEqual(2 * maxSize);
          }
        },
      ),
      { seed: 20261123, numRuns: 300 },
    );
  });

  it('refuses a size that is not a positive integer', () => {
    expect(() => new RecentMap(0)).toThrow(TypeError);
    expect(() => new RecentMap(1.5)).toThrow(TypeError);
  });
});
