/**
 * Memoised canonicalisation. Readers ask for the same few thousand pages over and over, and
 * parsing, validating, sorting and encoding a query costs ~2–3 µs of a ~20 µs hit: the result
 * (a canonical read, or the 400 it deserves) is kept per raw path and query. Pure functions of
 * their input, so a memoised answer is always the answer; bounded, and only short targets are kept.
 */
import type { ProxyError } from '../errors/proxy-error.js';
import { RecentMap } from '../platform/recent-map.js';
import { type CanonicalRead, buildCanonicalRead } from './canonical-read.js';
import { type RawParam, hasAccessTokenParam, parseRawQuery } from './query.js';
import type { Route } from './route.js';

export interface ParsedQuery {
  readonly params: readonly RawParam[];
  readonly hasAccessToken: boolean;
}

export interface CanonicalMemo {
  parse(rawQuery: string): ParsedQuery;
  /** `target`: the raw request target the route and the query were read from, which keys the memo. */
  read(
    route: Extract<Route, { kind: 'list' | 'record' }>,
    target: string,
    parsed: ParsedQuery,
  ): CanonicalRead | ProxyError;
}

/** Longer targets are canonicalised every time: memory stays bounded by entries × this. */
const MAX_MEMO_LENGTH = 512;
const NO_QUERY: ParsedQuery = { params: [], hasAccessToken: false };

export function createCanonicalMemo(maxEntries = 10_000): CanonicalMemo {
  const parsed = new RecentMap<string, ParsedQuery>(maxEntries);
  const reads = new RecentMap<string, CanonicalRead | ProxyError>(maxEntries);
  return {
    parse(rawQuery) {
      if (rawQuery === '') return NO_QUERY;
      const known = parsed.get(rawQuery);
      if (known !== undefined) return known;
      const params = parseRawQuery(rawQuery);
      const result = { params, hasAccessToken: hasAccessTokenParam(params) };
      if (rawQuery.length <= MAX_MEMO_LENGTH) parsed.set(rawQuery, result);
      return result;
    },
    read(route, target, query) {
      // The route and the query are functions of the raw target: it alone keys their reading.
      const known = reads.get(target);
      if (known !== undefined) return known;
      const result = buildCanonicalRead(route, query.params);
      if (target.length <= MAX_MEMO_LENGTH) reads.set(target, result);
      return result;
    },
  };
}
