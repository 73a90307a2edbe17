/**
 * The fair line of waiting requests (src/upstream-guard/fair-line.ts): companies served in turn, each as
 * many slots in a row as its weight; first come first served within a company; a company alone
 * takes everything; a company that comes back joins the rotation at its end.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { FairLine } from '../../src/upstream-guard/fair-line.js';

interface Entry {
  readonly company: string;
  readonly n: number;
}

/** Serves `count` slots from `line`: the entries in the order they were served. */
function serve(line: FairLine<Entry>, ids: Map<Entry, number>, count: number): Entry[] {
  const served: Entry[] = [];
  for (let i = 0; i < count; i++) {
    const next = line.peek();
    if (next === undefined) break;
    line.served(next.company);
    line.remove(ids.get(next) ?? -1, next.company);
    served.push(next);
  }
  return served;
}

/** A line with `perCompany[c]` requests of each company c, added company after company. */
function lineOf(perCompany: Record<string, number>, weight?: (company: string) => number) {
  const line = new FairLine<Entry>(weight);
  const ids = new Map<Entry, number>();
  let id = 0;
  for (const [company, count] of Object.entries(perCompany))
    for (let n = 0; n < count; n++) {
      const entry = { company, n };
      ids.set(entry, id);
      line.add(id++, entry);
    }
  return { line, ids };
}

describe('the fair line', () => {
  it('serves companies in turn, each company first come first served, whatever the length of its line', () => {
    const { line, ids } = lineOf({ storm: 40, b: 3 });
    const served = serve(line, ids, 8).map((e) => `${e.company}${String(e.n)}`);
    expect(served).toEqual(['storm0', 'b0', 'storm1', 'b1', 'storm2', 'b2', 'storm3', 'storm4']);
    expect(line.size).toBe(35);
  });

  it('gives a company as many slots in a row as its weight', () => {
    const { line, ids } = lineOf({ paying: 10, free: 10 }, (company) => (company === 'paying' ? 3 : 1));
    const served = serve(line, ids, 8).map((e) => e.company);
    expect(served).toEqual(['paying', 'paying', 'paying', 'free', 'paying', 'paying', 'paying', 'free']);
  });

  it('is work-conserving: a company alone takes every slot', () => {
    const { line, ids } = lineOf({ alone: 5 });
    expect(serve(line, ids, 10)).toHaveLength(5);
    expect(line.size).toBe(0);
    expect(line.peek()).toBeUndefined();
  });

  it('lets a request leave its line (its wait over) without losing the turn of anyone else', () => {
    const { line, ids } = lineOf({ a: 2, b: 2 });
    const [a0] = [...line.values()];
    expect(line.remove(ids.get(a0 ?? { company: '', n: 0 }) ?? -1, 'a')).toBe(true);
    expect(line.remove(12345, 'a')).toBe(false);
    expect(serve(line, ids, 3).map((e) => `${e.company}${String(e.n)}`)).toEqual(['a1', 'b0', 'b1']);
  });

  it('puts a company that comes back at the end of the rotation', () => {
    const { line, ids } = lineOf({ a: 1, b: 3 });
    expect(serve(line, ids, 2).map((e) => e.company)).toEqual(['a', 'b']);
    const back = { company: 'a', n: 9 };
    ids.set(back, 100);
    line.add(100, back);
    expect(serve(line, ids, 3).map((e) => e.company)).toEqual(['b', 'a', 'b']);
  });

  it('keeps the slots of every company that waits throughout, over its weight, within one of the others’', () => {
    fc.assert(
      fc.property(
        fc.dictionary(fc.constantFrom('a', 'b', 'c', 'd'), fc.integer({ min: 1, max: 4 }), { minKeys: 2 }),
        fc.integer({ min: 1, max: 200 }),
        (weights, slots) => {
          const companies = Object.keys(weights);
          // Every company waits throughout: each has more requests than there are slots.
          const { line, ids } = lineOf(
            Object.fromEntries(companies.map((c) => [c, slots + 1])),
            (c) => weights[c] ?? 1,
          );
          const served = serve(line, ids, slots);
          const taken = (c: string): number => served.filter((e) => e.company === c).length;
          for (const x of companies)
            for (const y of companies) {
              const wx = weights[x] ?? 1;
              const wy = weights[y] ?? 1;
              expect(Math.abs(taken(x) / wx - taken(y) / wy)).toBeLessThanOrEqual(1);
            }
        },
      ),
      { seed: 20261128, numRuns: 300 },
    );
  });
});
