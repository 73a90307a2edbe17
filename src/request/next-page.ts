/**
 * The next page of a keyset walk (the seed's pagination rule: when `meta.has_more` is true, the
 * next request repeats the same filters and sends `after_id` equal to `meta.next_after_id`): the
 * canonical read a walker's next request makes, built from the page it was given. Pure; the
 * prefetch (docs/cache.md#prefetch) keys and fetches exactly what that request would.
 */
import type { ProxyError } from '../errors/proxy-error.js';
import { type CanonicalRead, listRead } from './canonical-read.js';
import { canonicaliseListQuery, type RawParam } from './query.js';

/** A list page's `data` (unchecked) and `meta` object. */
export interface PageParts {
  readonly data: unknown;
  readonly meta: Record<string, unknown>;
}

/** A parsed JSON value's `data` and `meta`; `undefined` when it is not an object with a `meta` object. */
export function partsOf(page: unknown): PageParts | undefined {
  if (typeof page !== 'object' || page === null) return undefined;
  const { data, meta } = page as { readonly data?: unknown; readonly meta?: unknown };
  if (typeof meta !== 'object' || meta === null) return undefined;
  return { data, meta: meta as Record<string, unknown> };
}

/** A list page body's `data` (unchecked) and `meta`; `undefined` when it is not a JSON object with a `meta` object. */
export function pageParts(body: Buffer): PageParts | undefined {
  let page: unknown;
  try {
    page = JSON.parse(body.toString('utf8'));
  } catch {
    return undefined;
  }
  return partsOf(page);
}

/** The cursor a list page names for the page after it; `undefined` when it is the last. */
export function nextCursor(body: Buffer): string | undefined {
  const meta = pageParts(body)?.meta;
  if (meta === undefined) return undefined;
  const { has_more: hasMore, next_after_id: next } = meta;
  if (hasMore !== true || typeof next !== 'number' || !Number.isSafeInteger(next) || next < 0) return undefined;
  return String(next);
}

/**
 * Whether a list read follows a cursor (`after_id`): a page past the first, which a client asks
 * for only with the cursor a page before it named, as a keyset walker does.
 */
export function followsCursor(read: CanonicalRead): boolean {
  return read.kind === 'list' && (read.query.startsWith('after_id=') || read.query.includes('&after_id='));
}

/**
 * The cursor a list read starts after: its `after_id`, 0 without one; `undefined` for a record
 * read or a cursor past the safe integers.
 */
export function cursorOf(read: CanonicalRead): number | undefined {
  if (read.kind !== 'list') return undefined;
  const cursor = paramsOf(read.query).find((p) => p.name === 'after_id')?.value;
  if (cursor === undefined) return 0;
  const value = Number(cursor);
  return Number.isSafeInteger(value) ? value : undefined;
}

/** The canonical query's parameters, decoded (it was built strictly encoded: each decodes). */
function paramsOf(query: string): RawParam[] {
  if (query === '') return [];
  return query.split('&').map((pair) => {
    const at = pair.indexOf('=');
    return { name: pair.slice(0, at), value: decodeURIComponent(pair.slice(at + 1)) };
  });
}

/** The read of the page after `read`'s, at `cursor`; `undefined` for a record read or a cursor the grammar refuses. */
export function nextPageRead(read: CanonicalRead, cursor: string): CanonicalRead | undefined {
  if (read.kind !== 'list') return undefined;
  const params = paramsOf(read.query).filter((p) => p.name !== 'after_id');
  params.push({ name: 'after_id', value: cursor });
  const query: { readonly text: string } | ProxyError = canonicaliseListQuery(read.resource, params);
  if (query instanceof Error) return undefined;
  return listRead(read.resource, query.text);
}
