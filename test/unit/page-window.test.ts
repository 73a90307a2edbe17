/**
 * Keyset windows and window marks (src/cache/entry/page-window.ts, src/cache/entry/marks.ts,
 * docs/cache.md#window-marks): a list page read at cursor A, last id L, `has_more` H can change
 * through a change of record X only when A < X and (X ≤ L or not H); a page is given a window only
 * when it keeps the keyset rule; a mark names the records it changed, and a list page is stale
 * only from the first mark since its own that its window can hold.
 */
import { describe, expect, it } from 'vitest';
import type { CacheEntry } from '../../src/cache/entry/entry.js';
import { decodeEntry, encodeEntry } from '../../src/cache/entry/entry.js';
import { asOfMarks, listsMark, newMark } from '../../src/cache/entry/marks.js';
import {
  decodeChangedIds,
  encodeChangedIds,
  MAX_LISTED_IDS,
  type PageWindow,
  pageWindowOf,
  reaches,
} from '../../src/cache/entry/page-window.js';
import { L1Cache } from '../../src/cache/stores/l1.js';
import { pageParts } from '../../src/request/next-page.js';
import { storedEntry } from '../helpers/entries.js';

/** The window of a page body, parsed as the upstream's check parses it. */
const windowOf = (after: number, body: Buffer) => pageWindowOf(after, pageParts(body));

const page = (ids: readonly number[], more: boolean, next?: number): Buffer =>
  Buffer.from(
    JSON.stringify({
      data: ids.map((id) => ({ id, name: `r${String(id)}` })),
      meta: { per_page: ids.length, has_more: more, ...(next !== undefined && { next_after_id: next }) },
    }),
  );

const ids = (...list: number[]) => ({ kind: 'ids', ids: list }) as const;

describe('a list page’s keyset window', () => {
  it('is its cursor, its last id and whether it has more, for a page that keeps the keyset rule', () => {
    expect(windowOf(100, page([101, 105, 109], true, 109))).toEqual({ after: 100, last: 109, more: true });
    expect(windowOf(0, page([3, 4], false))).toEqual({ after: 0, last: 4, more: false });
    expect(windowOf(500, page([], false))).toEqual({ after: 500, last: undefined, more: false });
  });

  it('is none for a page that breaks it: ids out of order, at or below the cursor, or a cursor not its last', () => {
    expect(windowOf(0, page([5, 3], false))).toBeUndefined();
    expect(windowOf(0, page([3, 3], false))).toBeUndefined();
    expect(windowOf(10, page([10, 11], false))).toBeUndefined();
    expect(windowOf(0, page([1, 2], true, 7))).toBeUndefined();
    expect(windowOf(0, page([1, 2], true))).toBeUndefined();
    expect(windowOf(0, page([], true, 0))).toBeUndefined();
    expect(windowOf(0, Buffer.from('{"data":[{"id":"1"}],"meta":{"has_more":false}}'))).toBeUndefined();
    expect(windowOf(0, Buffer.from('{"data":[],"meta":{}}'))).toBeUndefined();
    expect(windowOf(0, Buffer.from('not json'))).toBeUndefined();
  });

  it('holds a change of X exactly when A < X and (X ≤ L or the page is the last)', () => {
    const middle: PageWindow = { after: 100, last: 109, more: true };
    expect(reaches(middle, ids(100))).toBe(false);
    expect(reaches(middle, ids(101))).toBe(true);
    expect(reaches(middle, ids(109))).toBe(true);
    expect(reaches(middle, ids(110))).toBe(false);
    expect(reaches(middle, ids(5, 500))).toBe(false);
    expect(reaches(middle, ids(5, 105, 500))).toBe(true);
    const last: PageWindow = { after: 100, last: 109, more: false };
    expect(reaches(last, ids(1_000_000))).toBe(true);
    expect(reaches(last, ids(100))).toBe(false);
    const empty: PageWindow = { after: 500, last: undefined, more: false };
    expect(reaches(empty, ids(501))).toBe(true);
    expect(reaches(empty, ids(500))).toBe(false);
  });

  it('holds a range of changed ids when any id of it would be held', () => {
    const middle: PageWindow = { after: 100, last: 109, more: true };
    expect(reaches(middle, { kind: 'range', low: 1, high: 100 })).toBe(false);
    expect(reaches(middle, { kind: 'range', low: 1, high: 101 })).toBe(true);
    expect(reaches(middle, { kind: 'range', low: 109, high: 900 })).toBe(true);
    expect(reaches(middle, { kind: 'range', low: 110, high: 900 })).toBe(false);
    expect(reaches({ after: 100, last: 109, more: false }, { kind: 'range', low: 200, high: 300 })).toBe(true);
  });

  it('is reached by every change when either side is not known', () => {
    expect(reaches(undefined, ids(1))).toBe(true);
    expect(reaches({ after: 100, last: 109, more: true }, undefined)).toBe(true);
  });

  it('is kept with the stored entry', () => {
    const window: PageWindow = { after: 7, last: undefined, more: false };
    const stored = decodeEntry(encodeEntry({ ...storedEntry(1_000), window }));
    expect(stored?.window).toEqual(window);
    expect(decodeEntry(encodeEntry(storedEntry(1_000)))?.window).toBeUndefined();
  });
});

describe('the ids a mark names', () => {
  it('are each id while few, their range past that, and none when one is not a record id', () => {
    expect(encodeChangedIds(['9', '1', '5', '5'])).toBe('1,5,9');
    const many = Array.from({ length: MAX_LISTED_IDS + 1 }, (_, i) => String(100 + i));
    expect(encodeChangedIds(many)).toBe(`100-${String(100 + MAX_LISTED_IDS)}`);
    expect(encodeChangedIds(['1', 'abc'])).toBeUndefined();
    expect(encodeChangedIds([])).toBeUndefined();
    expect(decodeChangedIds('1,5,9')).toEqual(ids(1, 5, 9));
    expect(decodeChangedIds('3-900')).toEqual({ kind: 'range', low: 3, high: 900 });
    expect(decodeChangedIds('9-3')).toBeUndefined();
    expect(decodeChangedIds('1,,2')).toBeUndefined();
  });
});

describe('a list page as of window marks', () => {
  const window: PageWindow = { after: 100, last: 109, more: true };
  const filled = (mark: string | undefined): CacheEntry =>
    storedEntry(12_000, {
      freshUntil: 72_000,
      keepUntil: 132_000,
      window,
      ...(mark !== undefined && { mark }),
    });

  it('stays fresh through marks whose records its window cannot hold', () => {
    const [a, b, c] = [newMark(10_000), newMark(20_000), newMark(30_000)];
    const entry = filled(a);
    const history = [listsMark(c, '500'), listsMark(b, '5,50'), a].join(' ');
    expect(asOfMarks(entry, history)).toBe(entry);
  });

  it('is stale from the first mark since its own that its window can hold', () => {
    const [a, b, c, d] = [newMark(10_000), newMark(20_000), newMark(30_000), newMark(40_000)];
    const history = [listsMark(d, '105'), listsMark(c, '104'), listsMark(b, '500'), a].join(' ');
    expect(asOfMarks(filled(a), history)).toMatchObject({ freshUntil: 30_000, invalidatedAt: 30_000 });
  });

  it('is stale from a mark of the whole resource, and from the first mark when its own is lost', () => {
    const [a, b, c] = [newMark(10_000), newMark(20_000), newMark(30_000)];
    expect(asOfMarks(filled(a), [c, listsMark(b, '500'), a].join(' ')).invalidatedAt).toBe(30_000);
    // Its own mark no longer in the history: nothing since it can be ruled out.
    expect(asOfMarks(filled(newMark(5_000)), [listsMark(c, '500'), listsMark(b, '500')].join(' ')).invalidatedAt).toBe(
      12_000,
    );
  });

  it('judges a page without a window by every mark, as before windows', () => {
    const [a, b] = [newMark(10_000), newMark(20_000)];
    const entry = storedEntry(12_000, { freshUntil: 72_000, keepUntil: 132_000, mark: a });
    expect(asOfMarks(entry, [listsMark(b, '500'), a].join(' ')).invalidatedAt).toBe(20_000);
  });
});

describe('the L1 told of window marks', () => {
  const TAG = '{1:movements}';
  const key = (n: number): string => `slab:${TAG}:co:list:after_id=${String(n)}&per_page=10`;
  const l1 = (): L1Cache => {
    const cache = new L1Cache({ maxBytes: 1 << 20, ttlMs: 1_000, clock: { now: () => 0 } });
    cache.tell(true);
    cache.noteGeneration(TAG, 'g1');
    return cache;
  };
  const copy = (window: PageWindow | undefined): CacheEntry =>
    storedEntry(0, { generation: 'g1', freshUntil: 60_000, ...(window !== undefined && { window }) });

  it('serves on the copies whose window holds none of the records announced, and no other', () => {
    const cache = l1();
    const deep = copy({ after: 100, last: 110, more: true });
    const last = copy({ after: 110, last: 115, more: false });
    const windowless = copy(undefined);
    cache.set(key(100), deep);
    cache.set(key(110), last);
    cache.set(key(0), windowless);
    // A record appended: only the last page can show it.
    cache.markGroup(TAG, listsMark(newMark(1_000), '116'));
    expect(cache.get(key(100), TAG)).toBe(deep);
    expect(cache.get(key(110), TAG)).toBeUndefined();
    expect(cache.get(key(0), TAG)).toBeUndefined();
    // A change of the whole resource: every copy set before it.
    cache.markGroup(TAG, newMark(2_000));
    expect(cache.get(key(100), TAG)).toBeUndefined();
  });

  it('serves no copy older than the invalidations it remembers, whatever its window', () => {
    const cache = l1();
    const deep = copy({ after: 100, last: 110, more: true });
    cache.set(key(100), deep);
    for (let i = 0; i < 16; i++) cache.markGroup(TAG, listsMark(newMark(i), '900'));
    expect(cache.get(key(100), TAG)).toBe(deep);
    cache.markGroup(TAG, listsMark(newMark(99), '900'));
    expect(cache.get(key(100), TAG)).toBeUndefined();
  });
});
