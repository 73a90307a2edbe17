/**
 * The `Cache-Status` response header (RFC 9211), member `slab-proxy`. Never the `key` parameter:
 * keys name tenants and filters.
 */
export const CACHE_NAME = 'slab-proxy';

/** A short form for logs and metrics. */
export type CacheResult = 'hit' | 'stale' | 'miss' | 'collapsed' | 'bypass';

export type CacheStatus =
  /** Fresh from the cache; `ttl` is the remaining freshness in seconds. */
  | { readonly kind: 'hit'; readonly ttl: number }
  /** Stale but within stale-while-revalidate: served at once, one background refresh runs. */
  | { readonly kind: 'revalidating'; readonly ttl: number }
  /**
   * Forwarded; `stored` when the answer was cached. `stale`: a stored entry was forwarded to be
   * revalidated (`fwd=stale`, RFC 9211 §2.2; `fwd-status=304` when the upstream said it is still
   * current, and `stored` when the stored entry was freshened).
   */
  | { readonly kind: 'miss'; readonly fwdStatus: number; readonly stored: boolean; readonly stale?: boolean }
  /** Waited for another request's fetch (in this process or on another replica) and reused it. */
  | { readonly kind: 'collapsed'; readonly fwdStatus: number; readonly stale?: boolean }
  /** The upstream failed or answered 429: a stale copy, within stale-if-error. */
  | { readonly kind: 'stale-if-error'; readonly ttl: number; readonly fwdStatus: number };

/** A hit's field for each remaining freshness seen, made once (a hit's text is only its ttl). */
const hitFields = new Map<number, string>();
/** TTLs are whole seconds below the longest policy: a bound all the same. */
const MAX_REMEMBERED_TTLS = 4_096;

function hitField(ttl: number): string {
  let field = hitFields.get(ttl);
  if (field === undefined) {
    field = `${CACHE_NAME}; hit; ttl=${ttl}`;
    if (hitFields.size < MAX_REMEMBERED_TTLS) hitFields.set(ttl, field);
  }
  return field;
}

export function formatCacheStatus(status: CacheStatus): string {
  switch (status.kind) {
    case 'hit':
      return hitField(status.ttl);
    case 'revalidating':
      return `${CACHE_NAME}; hit; ttl=${status.ttl}; detail=stale-while-revalidate`;
    case 'miss':
      return `${CACHE_NAME}; fwd=${status.stale === true ? 'stale' : 'miss'}; fwd-status=${status.fwdStatus}${status.stored ? '; stored' : ''}`;
    case 'collapsed':
      return `${CACHE_NAME}; fwd=${status.stale === true ? 'stale' : 'miss'}; fwd-status=${status.fwdStatus}; collapsed`;
    case 'stale-if-error':
      return `${CACHE_NAME}; fwd=stale; fwd-status=${status.fwdStatus}; ttl=${status.ttl}`;
  }
}

export function cacheResultOf(status: CacheStatus): CacheResult {
  switch (status.kind) {
    case 'hit':
      return 'hit';
    case 'revalidating':
    case 'stale-if-error':
      return 'stale';
    case 'miss':
      return 'miss';
    case 'collapsed':
      return 'collapsed';
  }
}
