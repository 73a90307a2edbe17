/**
 * Invalidation marks (src/cache/entry/marks.ts): a key's history, newest first and bounded; the marks an
 * entry is stamped with; and when an entry filled under older marks became stale: at the first mark
 * set after its own, whatever came later, and at once when that is not known.
 */
import { describe, expect, it } from 'vitest';
import type { CacheEntry } from '../../src/cache/entry/entry.js';
import {
  asOfMarks,
  HISTORY,
  headsOf,
  MarkTable,
  markedAt,
  newMark,
  pageMark,
  withMark,
} from '../../src/cache/entry/marks.js';
import { storedEntry } from '../helpers/entries.js';

function entry(storedAt: number, mark?: string): CacheEntry {
  return storedEntry(storedAt, {
    freshUntil: storedAt + 60_000,
    keepUntil: storedAt + 120_000,
    ...(mark !== undefined && { mark }),
  });
}

describe('invalidation marks', () => {
  it('carry when they were set, and a key keeps the newest HISTORY of them', () => {
    expect(markedAt(newMark(1_800_000_000_123))).toBe(1_800_000_000_123);
    let value: string | undefined;
    const marks = Array.from({ length: HISTORY + 3 }, (_, i) => newMark(1_000 + i));
    for (const mark of marks) value = withMark(value, mark);
    expect(value?.split(' ')).toEqual(marks.slice(-HISTORY).reverse());
  });

  it('stamp an entry with the newest of each key, none when no key is set', () => {
    expect(pageMark([null, undefined])).toBe('');
    expect(headsOf(pageMark(['b a', null]))).toBe('b/');
    expect(headsOf('')).toBe('');
  });

  it('leave an entry filled under the newest marks as it is', () => {
    const filled = entry(5_000, 'b');
    expect(asOfMarks(filled, 'b a')).toBe(filled);
    expect(asOfMarks(entry(5_000), '')).toEqual(entry(5_000));
  });

  it('make an entry stale from the first mark after its own, however many came later', () => {
    const [a, b, c] = [newMark(10_000), newMark(20_000), newMark(30_000)];
    const filled = entry(12_000, a);
    const seen = asOfMarks(filled, [c, b, a].join(' '));
    expect(seen).toMatchObject({ freshUntil: 20_000, invalidatedAt: 20_000 });
    // Filled before any mark was ever set: stale from the first one.
    expect(asOfMarks(entry(5_000), [b, a].join(' ')).invalidatedAt).toBe(10_000);
    // A record page: the earlier of its two keys' first marks since.
    expect(asOfMarks(entry(12_000, `/${a}`), `${c}/${b} ${a}`).invalidatedAt).toBe(20_000);
  });

  it('make an entry stale from when it was stored when its own mark is older than the history, or lost', () => {
    const history = Array.from({ length: HISTORY }, (_, i) => newMark(50_000 - i * 1_000)).join(' ');
    expect(asOfMarks(entry(7_000, newMark(1_000)), history).invalidatedAt).toBe(7_000);
    expect(asOfMarks(entry(7_000, newMark(1_000)), '').invalidatedAt).toBe(7_000);
  });

  it('in a process, expire a record’s mark after its keep and drop it once the table has doubled', () => {
    let now = 0;
    const table = new MarkTable(() => now);
    table.set('lists', 'm1');
    table.set('lists', 'm2');
    table.set('record', 'm2', 1_000);
    expect(table.pageMark(['lists'])).toBe('m2 m1');
    expect(table.pageMark(['all', 'record'])).toBe('/m2');
    now = 1_000;
    expect(table.get('record')).toBeUndefined();
    expect(table.get('lists')).toBe('m2 m1');
  });
});
