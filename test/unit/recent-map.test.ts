/**
 * The bounded map of the in-process tiers (src/platform/recent-map.ts): what is used stays, what
 * was not used for a whole generation goes, and what is held never exceeds its bound.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { RecentMap } from '../../src/platform/recent-map.js';

describe('RecentMap', () => {
  it('keeps what is used and lets go of what was not used for a whole generation', () => {
    const map = new RecentMap<string, number>({ maxSize: 6 }); // generations of 3
    for (const [i, key] of ['a', 'b', 'c'].entries()) map.set(key, i);
    map.set('d', 3); // the first generation (a, b, c) becomes the older one
    expect(map.get('a')).toBe(0); // used: moved into the current generation (d, a)
    map.set('e', 4); // current: d, a, e
    map.set('f', 5); // full: (d, a, e) older; b and c, unused for a generation, are gone
    expect(map.get('b')).toBeUndefined();
    expect(map.get('c')).toBeUndefined();
    expect([map.get('a'), map.get('d'), map.get('e'), map.get('f')]).toEqual([0, 3, 4, 5]);
  });

  it("takes a held key's new value where it is: setting it again never lets others go", () => {
    const map = new RecentMap<string, number>({ maxSize: 6 }); // generations of 3
    for (const [i, key] of ['a', 'b', 'c'].entries()) map.set(key, i);
    map.set('a', 10); // the current generation is full: replaced in place, no turn
    map.set('d', 3); // the turn: (a, b, c) older, d current
    map.set('b', 11); // held in the older one, the current has room: moved into it
    map.set('e', 4); // current: d, b, e (full)
    map.set('a', 12); // held in the older one, the current full: replaced there, no turn
    expect([map.get('a'), map.get('b'), map.get('c'), map.get('d'), map.get('e')]).toEqual([12, 11, 2, 3, 4]);
    expect(map.size).toBe(5);
  });

  it('counts sizes: never holds more than its bound, and keeps nothing larger than a generation', () => {
    const map = new RecentMap<string, string>({ maxSize: 100, sizeOf: (value) => value.length });
    map.set('big', 'x'.repeat(51));
    expect(map.get('big')).toBeUndefined();
    for (let i = 0; i < 20; i++) map.set(`k${i}`, 'y'.repeat(20));
    expect(map.totalSize).toBeLessThanOrEqual(100);
    expect(map.get('k19')).toBe('y'.repeat(20));
    map.delete('k19');
    expect(map.get('k19')).toBeUndefined();
    expect(map.totalSize).toBe(20 * map.size);
  });

  it('holds at most its bound, and answers the last value set for any key it holds', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 2, max: 16 }),
        fc.array(fc.tuple(fc.constantFrom('get', 'set', 'delete'), fc.integer({ min: 0, max: 20 }), fc.nat(9)), {
          maxLength: 200,
        }),
        (maxSize, operations) => {
          const map = new RecentMap<number, { readonly version: number; readonly size: number }>({
            maxSize,
            sizeOf: (value) => value.size,
          });
          const last = new Map<number, number>();
          let version = 0;
          for (const [operation, key, size] of operations) {
            if (operation === 'set') {
              version += 1;
              map.set(key, { version, size });
              last.set(key, version);
              // What was just set is held, unless it is larger than a generation.
              expect(map.get(key)?.version).toBe(size <= Math.floor(maxSize / 2) ? version : undefined);
            } else if (operation === 'delete') {
              map.delete(key);
              last.delete(key);
            } else {
              const value = map.get(key);
              // Forgetting is allowed; a wrong or resurrected value is not.
              if (value !== undefined) expect(value.version).toBe(last.get(key));
            }
            expect(map.totalSize).toBeLessThanOrEqual(maxSize);
          }
        },
      ),
      { seed: 20261123, numRuns: 300 },
    );
  });

  it('refuses a bound that is not an integer of at least 2', () => {
    expect(() => new RecentMap({ maxSize: 1 })).toThrow(TypeError);
    expect(() => new RecentMap({ maxSize: 2.5 })).toThrow(TypeError);
  });
});
