/**
 * The next page of a keyset walk: the read a walker's next request makes, built from the
 * page it was given, must be the very read that request canonicalises to: same filters, same
 * `per_page`, the page's `next_after_id`, in canonical form; so a prefetched page is keyed and
 * fetched exactly as the walker's own request would be.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { API_PREFIX } from '../../src/catalog/resources.js';
import type { CanonicalRead } from '../../src/request/canonical-read.js';
import { followsCursor, nextCursor, nextPageRead } from '../../src/request/next-page.js';
import { canonicaliseTarget } from '../helpers/canonicalise.js';

function read(target: string): CanonicalRead {
  const built = canonicaliseTarget(target);
  if (built instanceof Error) throw built;
  return built;
}

const page = (meta: unknown): Buffer => Buffer.from(JSON.stringify({ data: [], meta }));

describe('followsCursor', () => {
  it('is true for a list read with after_id, wherever it sorts among the filters, and false otherwise', () => {
    expect(followsCursor(read(`${API_PREFIX}/receipts?after_id=7`))).toBe(true);
    expect(followsCursor(read(`${API_PREFIX}/receipts?warehouse_id=2&per_page=5&after_id=7&shipment_id=3`))).toBe(true);
    expect(followsCursor(read(`${API_PREFIX}/receipts?per_page=5`))).toBe(false);
    expect(followsCursor(read(`${API_PREFIX}/receipts`))).toBe(false);
    expect(followsCursor(read(`${API_PREFIX}/receipts/7`))).toBe(false);
  });
});

describe('nextCursor', () => {
  it('is the next_after_id of a page that has more', () => {
    expect(nextCursor(page({ per_page: 30, has_more: true, next_after_id: 57 }))).toBe('57');
    expect(nextCursor(page({ per_page: 30, has_more: true, next_after_id: 0 }))).toBe('0');
  });

  it('is nothing for the last page, a page without a cursor, or what is not a page', () => {
    expect(nextCursor(page({ per_page: 30, has_more: false, next_after_id: 57 }))).toBeUndefined();
    expect(nextCursor(page({ per_page: 30, has_more: true }))).toBeUndefined();
    expect(nextCursor(page({ has_more: true, next_after_id: '57' }))).toBeUndefined();
    expect(nextCursor(page({ has_more: true, next_after_id: -1 }))).toBeUndefined();
    expect(nextCursor(page({ has_more: true, next_after_id: 1.5 }))).toBeUndefined();
    expect(nextCursor(page(null))).toBeUndefined();
    expect(nextCursor(Buffer.from('{"data":'))).toBeUndefined();
    expect(nextCursor(Buffer.from('[]'))).toBeUndefined();
  });
});

describe('nextPageRead', () => {
  it('is what the walker’s next request canonicalises to, however its filters were written', () => {
    const first = read(`${API_PREFIX}/receipts?warehouse_id=7&per_page=100&shipment_id=3`);
    expect(nextPageRead(first, '420')).toEqual(
      read(`${API_PREFIX}/receipts?shipment_id=3&after_id=420&warehouse_id=7&per_page=100`),
    );
  });

  it('keeps a text filter byte for byte through its encoding', () => {
    const first = read(`${API_PREFIX}/fulfilments?status=a%20b%26c%3Dd%25e%2B%C3%A9&per_page=10`);
    expect(nextPageRead(first, '9')).toEqual(
      read(`${API_PREFIX}/fulfilments?after_id=9&per_page=10&status=a%20b%26c%3Dd%25e%2B%C3%A9`),
    );
  });

  it('replaces the cursor of a page that had one, and keeps the default page size explicit', () => {
    const second = read(`${API_PREFIX}/receipts?after_id=420`);
    expect(nextPageRead(second, '450')).toEqual(read(`${API_PREFIX}/receipts?per_page=30&after_id=450`));
  });

  it('never makes a read of another resource, and none for a record', () => {
    expect(nextPageRead(read(`${API_PREFIX}/receipts/12`), '5')).toBeUndefined();
    const next = nextPageRead(read(`${API_PREFIX}/warehouses?per_page=5`), '5');
    expect(next?.resource.name).toBe('warehouses');
  });

  it('equals the canonical read of the same filters with the cursor, for any filters and cursor', () => {
    const value = fc.integer({ min: 1, max: 999_999 }).map(String);
    fc.assert(
      fc.property(
        fc.option(value, { nil: undefined }),
        fc.option(value, { nil: undefined }),
        fc.integer({ min: 1, max: 100 }),
        fc.option(value, { nil: undefined }),
        fc.nat({ max: 1_000_000 }),
        (shipment, warehouse, perPage, after, cursor) => {
          const filters = [
            ...(shipment === undefined ? [] : [`shipment_id=${shipment}`]),
            ...(warehouse === undefined ? [] : [`warehouse_id=${warehouse}`]),
            `per_page=${String(perPage)}`,
          ];
          const given = read(
            `${API_PREFIX}/receipts?${[...filters, ...(after === undefined ? [] : [`after_id=${after}`])].join('&')}`,
          );
          const walkerAsks = read(
            `${API_PREFIX}/receipts?${[...filters.reverse(), `after_id=${String(cursor)}`].join('&')}`,
          );
          expect(nextPageRead(given, String(cursor))).toEqual(walkerAsks);
        },
      ),
    );
  });
});
