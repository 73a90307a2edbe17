/**
 * Memoised canonicalisation. Readers ask for the same few thousand pages over and over, and
 * parsing, validating, sorting and encoding a query is a large share of a hit
 * (docs/architecture.md#why-the-hit-path-is-built-as-it-is): the result
 * (a canonical read, or the 400 it deserves) is kept per raw request target. Pure functions of
 * their input, so a memoised answer is always the answer; bounded, and only short targets are kept.
 */
import type { ProxyError } from '../errors/proxy-error.js';
import { RecentMap } from '../platform/recent-map.js';
import { buildCanonicalRead, type CanonicalRead } from './canonical-read.js';
import { hasAccessTokenParam, parseRawQuery, type RawParam } from './query.js';
import type { Route } from './route.js';

export interface ParsedQuery {
  readonly params: readonly RawParam[];
  readonly hasAccessToken: boolean;
  /** The canonical read, once `read` has made it: one per target, which decides the route too. */
  canonical: CanonicalRead | ProxyError | undefined;
}

export interface CanonicalMemo {
  /** `target`: the raw request target (`req.url`), which keys the memo; `rawQuery`: its query. */
  parse(target: string, rawQuery: string): ParsedQuery;
  /** The canonical read of the target `parse` was given, for the route read from that target. */
  read(route: Extract<Route, { kind: 'list' | 'record' }>, parsed: ParsedQuery): CanonicalRead | ProxyError;
}

/** Longer targets are canonicalised every time: memory stays bounded by entries × this. */
const MAX_MEMO_LENGTH = 512;

export function createCanonicalMemo(maxEntries = 10_000): CanonicalMemo {
  // One entry per raw target: the route and the query are functions of it, and so is the
  // canonical read made of them. One lookup a hit, keyed by the string Node already made.
  const readings = new RecentMap<string, ParsedQuery>({ maxSize: maxEntries });
  return {
    parse(target, rawQuery) {
      const known = readings.get(target);
      if (known !== undefined) return known;
      const params = rawQuery === '' ? [] : parseRawQuery(rawQuery);
      const parsed: ParsedQuery = { params, hasAccessToken: hasAccessTokenParam(params), canonical: undefined };
      if (target.length <= MAX_MEMO_LENGTH) readings.set(target, parsed);
      return parsed;
    },
    read(route, parsed) {
      parsed.canonical ??= buildCanonicalRead(route, parsed.params);
      return parsed.canonical;
    },
  };
}
