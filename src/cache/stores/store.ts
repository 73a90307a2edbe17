/**
 * The `CacheStore` contract (after undici's): a small interface with two implementations, the
 * in-process store of the embedded default and the Redis store of production, both held to one
 * contract test suite. A store never throws: an unavailable store answers "nothing stored"
 * (`available: false`), and the read service fails open to the upstream (docs/cache.md).
 */
import type { CacheAddress, CacheGroup, MarkKeys } from '../entry/cache-key.js';
import type { CacheEntry } from '../entry/entry.js';

export interface StoreLookup {
  /** The stored entry, if any and decodable (any generation: the caller compares). */
  readonly entry: CacheEntry | undefined;
  /** The group's current purge generation; `undefined` when it has none yet. */
  readonly generation: string | undefined;
  /** False when the store could not be asked (Redis down or slow): nothing can be saved either. */
  readonly available: boolean;
  /**
   * The page's invalidation marks now (marks.ts, `pageMark`); absent or `''` when none is set. An
   * entry filled under others is stale (`asOfMarks`).
   */
  readonly mark?: string | undefined;
  /**
   * The L1's count of sets when this read began (`L1Cache.sequence`, given by store-reads.ts): a
   * copy set from what it read is older than an invalidation announced meanwhile.
   */
  readonly since?: number | undefined;
}

/**
 * What an invalidation marks (docs/cache.md#soft-invalidation): the group's lists always, and the
 * pages of the records named, or of every record when none is named.
 */
export interface Invalidation {
  /** The group's mark keys (`markKeys` under the cache's key prefix). */
  readonly keys: MarkKeys;
  /** The new mark (marks.ts, `newMark`): one per invalidation, as every replica is told it. */
  readonly mark: string;
  /**
   * What the group's lists key is given: the mark, with the ids of `records` when a list page's
   * keyset window can tell whether it holds them (marks.ts, `listsMark`; docs/cache.md#window-marks).
   */
  readonly listsMark: string;
  /** Record ids; `undefined`: the whole resource. */
  readonly records: readonly string[] | undefined;
  /** How long a record's mark is kept: at least as long as an entry filled before it may be. */
  readonly keepMs: number;
}

/**
 * What a freshen did: `freshened` (the stored entry now has the new times and validators, its body
 * untouched); `changed` (the stored entry is no longer the one given: another fill or freshen wrote
 * it meanwhile, and it is left as it is); `missing` (no entry any more: expired or evicted);
 * `unavailable` (the store could not be asked). Only `freshened` wrote anything.
 */
export type FreshenResult = 'freshened' | 'changed' | 'missing' | 'unavailable';

/** What an in-process store holds, for the metrics. */
export interface StoreFootprint {
  readonly entries: number;
  readonly bytes: number;
}

export interface CacheStore {
  readonly kind: 'memory' | 'redis';
  /**
   * The entry and its group's generation, in one round trip. `known`, an entry the caller holds
   * (an L1 copy): when it is still what is stored (its stored form's prefix, which names the fill,
   * its times and its body's hash, unchanged), the answer is `known` itself, and a remote store
   * sends and decodes no body: an L1 copy read again each lifetime would otherwise make a new
   * decoded entry of every hot page each second, old-generation garbage whose full collections are
   * a hit's tail (docs/architecture.md#why-the-hit-path-is-built-as-it-is).
   */
  lookup(address: CacheAddress, known?: CacheEntry): Promise<StoreLookup>;
  /** The same, synchronously, for stores in this process (the hit path's fast lane). */
  peek?(address: CacheAddress): StoreLookup;
  /**
   * False while the store is known not to answer for the address (a remote store's breaker skips
   * its node after a failure): a lookup now would answer `available: false` at once. Absent: always
   * asked.
   */
  reachable?(address: CacheAddress): boolean;
  /** The group's generation, created if it has none; `undefined` when the store is unavailable. */
  ensureGeneration(address: CacheAddress): Promise<string | undefined>;
  /** Keeps the entry until its `keepUntil`; true when it was kept. Never throws. */
  save(address: CacheAddress, entry: CacheEntry): Promise<boolean>;
  /**
   * Freshens a stored entry in place (RFC 9111 §4.3.4, docs/cache.md#revalidation): if the entry
   * under the address is still `stored` (as read, not written again since), it takes `fresher`'s
   * times and upstream validators and is kept until `fresher.keepUntil`; its body is neither sent
   * nor written. `fresher` must be `stored` freshened (`isRevalidated`): else nothing is written.
   * Never throws.
   */
  freshen(address: CacheAddress, stored: CacheEntry, fresher: CacheEntry): Promise<FreshenResult>;
  /**
   * Takes a page fetched ahead (docs/cache.md#prefetch): clears the stored entry's flag of a page no
   * request has taken, and answers true to the one caller of the fleet that cleared it (a request
   * that took the page counts it used; the replica that fetched it, once it expired, wasted).
   * False when the entry has no such flag, is gone, or the store could not be asked. Never throws.
   */
  takeAhead(address: CacheAddress): Promise<boolean>;
  /**
   * Marks pages stale without deleting them (`Invalidation`): their entries serve while one
   * conditional refresh runs. True when the marks were stored. Never throws.
   */
  invalidate(invalidation: Invalidation): Promise<boolean>;
  /** An O(1) purge: a new generation makes every older entry of the group a miss. */
  purge(group: CacheGroup): Promise<string | undefined>;
  /** Entries and bytes held, for stores in this process (a shared store's size is not one replica's). */
  footprint?(): StoreFootprint;
  /** Bytes held by each company, for stores in this process (docs/cache.md#company-shares). */
  bytesByCompany?(): ReadonlyMap<string, number>;
  close(): Promise<void>;
}

/** A fresh, unguessable generation id. Random rather than a counter: a lost or evicted generation
 * key then makes old entries misses instead of bringing a purged generation back. */
export function newGeneration(): string {
  return `${Date.now().toString(36)}.${Math.random().toString(36).slice(2, 10)}`;
}

/**
 * A copy held in this process as the store's answer it came from (its generation the group's as
 * it was then, the marks it was filled under): what a refresh led from the copy starts from.
 */
export function lookupOfCopy(entry: CacheEntry): StoreLookup {
  return {
    entry,
    generation: entry.generation,
    available: true,
    ...(entry.mark !== undefined && { mark: entry.mark }),
  };
}

/** True when the entry belongs to the group's current generation. */
export function isCurrent(lookup: StoreLookup): lookup is StoreLookup & { entry: CacheEntry } {
  return lookup.entry !== undefined && lookup.generation !== undefined && lookup.entry.generation === lookup.generation;
}
