/**
 * Refreshing a page ahead of its expiry. Pages filled together expire together: under
 * stale-while-revalidate their background refreshes then all start in the same millisecond, and
 * their CPU work (parsing, hashing, compressing each page) lands on the event loop in one burst,
 * in front of every hit queued behind it. Instead, a hit in the last `ahead` fraction of a page's
 * freshness lifetime refreshes the page in the background, at a point of that window that is the
 * page's own: a hash of its cache key places it, uniformly over the pages, and at the same point
 * on every replica (so that replicas contend for one fill lease rather than each refreshing at a
 * time of its own). A refreshed page is stored at its refresh time, so pages filled together do
 * not stay together: their next expiries are spread too.
 *
 * Pure: no clock, no state (after Kong's pure `cache_key`).
 */

/**
 * FNV-1a (32 bits) of the key, mixed by MurmurHash3's finaliser and mapped to [0, 1). FNV alone
 * leaves its high bits poorly mixed for keys that differ only near their end (pages of one
 * listing), which bunched them in the window.
 */
export function keyFraction(key: string): number {
  let hash = 0x811c9dc5;
  for (let i = 0; i < key.length; i++) {
    hash ^= key.charCodeAt(i);
    hash = Math.imul(hash, 0x01000193);
  }
  hash ^= hash >>> 16;
  hash = Math.imul(hash, 0x85ebca6b);
  hash ^= hash >>> 13;
  hash = Math.imul(hash, 0xc2b2ae35);
  hash ^= hash >>> 16;
  return (hash >>> 0) / 0x1_0000_0000;
}

/**
 * When a hit starts refreshing an entry stored at `storedAt` and fresh until `freshUntil` (ms): a
 * point in the last `ahead` fraction (0–1) of its lifetime, fixed by the key. `ahead` 0: never
 * before it is stale.
 */
export function refreshAheadAt(key: string, storedAt: number, freshUntil: number, ahead: number): number {
  return freshUntil - (freshUntil - storedAt) * ahead * keyFraction(key);
}

/** The first moment any entry with this lifetime could be refreshed ahead: checked before hashing the key. */
export function refreshWindowStart(storedAt: number, freshUntil: number, ahead: number): number {
  return freshUntil - (freshUntil - storedAt) * ahead;
}
