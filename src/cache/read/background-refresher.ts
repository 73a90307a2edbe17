/**
 * Background refreshes (docs/cache.md): a page past its refresh-ahead point, or stale within
 * stale-while-revalidate, is served as it is while one refresh runs behind it. Owns how many run
 * (bounded by `cache.refresh.maxConcurrent`) and which keys are being looked up ahead of a fill.
 */
import type { CacheAddress } from '../entry/cache-key.js';
import type { CacheEntry } from '../entry/entry.js';
import type { L1Cache } from '../stores/l1.js';
import { isCurrent, type StoreLookup } from '../stores/store.js';
import type { LeadBackgroundFill } from './fill-result.js';
import type { ReadRequest } from './origin.js';
import type { EffectivePolicy } from './policy.js';
import { refreshAheadAt, refreshWindowStart } from './refresh-ahead.js';
import type { StoreReads } from './store-reads.js';

export interface BackgroundRefresherOptions {
  /**
   * The last fraction of a page's freshness in which a hit refreshes it in the background, at a
   * point of its own (refresh-ahead.ts); 0: only once stale.
   */
  readonly ahead: number;
  /** Refreshes running at once, at most. */
  readonly maxRunning: number;
  readonly reads: StoreReads;
  readonly l1: L1Cache | undefined;
  /** Whether the key is being filled in this process. */
  readonly filling: (key: string) => boolean;
  /** Leads (or joins) the key's fill as a background fill. */
  readonly lead: LeadBackgroundFill;
  /** Told of every refresh, settled when it is over (tests, metrics). */
  readonly onRefresh?: ((settled: Promise<void>) => void) | undefined;
}

export class BackgroundRefresher {
  readonly #options: BackgroundRefresherOptions;
  /** Refreshes running (a refresh ahead counts from its store lookup on). */
  #running = 0;
  /** Keys whose refresh ahead is reading the store, before its fill (if any) is in flight. */
  readonly #lookingAhead = new Set<string>();

  constructor(options: BackgroundRefresherOptions) {
    if (!(options.ahead >= 0 && options.ahead <= 1)) throw new TypeError('cache.refresh.ahead must be between 0 and 1');
    if (!(options.maxRunning >= 1)) throw new TypeError('cache.refresh.maxConcurrent must be at least 1');
    this.#options = options;
  }

  /** Whether a fresh entry is past its refresh-ahead point, with no refresh of it running. */
  isDue(key: string, entry: CacheEntry, at: number): boolean {
    const { ahead } = this.#options;
    // The window's start first: most hits are before it, and pay no hash of the key.
    return (
      ahead > 0 &&
      at >= refreshWindowStart(entry.storedAt, entry.freshUntil, ahead) &&
      at >= refreshAheadAt(key, entry.storedAt, entry.freshUntil, ahead) &&
      !this.#options.filling(key) &&
      !this.#lookingAhead.has(key)
    );
  }

  /**
   * Refreshes a fresh entry held in this process ahead of its expiry. The store is read first:
   * another replica may have refreshed the page already (the copy here is then replaced by its
   * newer one); else this process leads a background fill, which stands down if another replica
   * holds the fill lease.
   */
  refreshAhead(request: ReadRequest, address: CacheAddress, policy: EffectivePolicy, held: CacheEntry): void {
    const { reads, l1, filling, lead } = this.#options;
    this.#run(async () => {
      this.#lookingAhead.add(address.key);
      let lookup: StoreLookup;
      try {
        // Given the copy held: while it is still what is stored, no body is read or decoded.
        lookup = await reads.read(address, held);
      } finally {
        this.#lookingAhead.delete(address.key);
      }
      if (lookup.available) l1?.noteGeneration(address.tag, lookup.generation);
      if (isCurrent(lookup) && lookup.entry.storedAt > held.storedAt) {
        l1?.set(address.key, lookup.entry, lookup.since);
        return;
      }
      if (filling(address.key)) return;
      await lead(request, address, policy, lookup);
    });
  }

  /** Refreshes an entry the store just gave (fresh past its point, or stale within its window). */
  refresh(request: ReadRequest, address: CacheAddress, policy: EffectivePolicy, lookup: StoreLookup): void {
    if (this.#options.filling(address.key) || this.#lookingAhead.has(address.key)) return;
    this.#run(() => this.#options.lead(request, address, policy, lookup));
  }

  /**
   * Runs one refresh, within the bound: none starts while `maxRunning` run (the page is still
   * served, fresh or stale, and a later request tries again).
   */
  #run(refresh: () => Promise<unknown>): void {
    if (this.#running >= this.#options.maxRunning) return;
    this.#running += 1;
    const settled = refresh().then(
      () => undefined,
      () => undefined, // a failed refresh leaves the copy it meant to replace; a later request tries again
    );
    void settled.finally(() => {
      this.#running -= 1;
    });
    this.#options.onRefresh?.(settled);
  }
}
