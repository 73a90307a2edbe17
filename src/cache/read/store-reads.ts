/**
 * Store reads in flight, per key: the requests that miss the L1 together (its copy of a hot page
 * expires for all of them at once) share one read and one decoding, instead of each making its
 * own. Only reads that may be shared go through it: a fill's reads after its lease must see the
 * store as it is then, and read it directly.
 */
import type { StoreLookupResult } from '../../observability/tracing.js';
import type { CacheAddress } from '../entry/cache-key.js';
import type { CacheEntry } from '../entry/entry.js';
import type { CacheStore, StoreLookup } from '../stores/store.js';

export class StoreReads {
  readonly #store: CacheStore;
  readonly #reading = new Map<string, Promise<StoreLookup>>();
  /** The L1's sequence, stamped on each read as it begins (`StoreLookup.since`). */
  readonly #sequence: (() => number) | undefined;

  constructor(store: CacheStore, sequence?: () => number) {
    this.#store = store;
    this.#sequence = sequence;
  }

  /**
   * The key's lookup: the one in flight, or a new one (given `known`, the copy the caller holds:
   * `CacheStore.lookup`). Either answers what is stored: a confirmation answers `known` only
   * when that is it.
   */
  read(address: CacheAddress, known?: CacheEntry): Promise<StoreLookup> {
    let pending = this.#reading.get(address.key);
    if (pending === undefined) {
      const since = this.#sequence?.();
      const lookup = this.#store.lookup(address, known);
      pending = (since === undefined ? lookup : lookup.then((found) => ({ ...found, since }))).finally(() =>
        this.#reading.delete(address.key),
      );
      this.#reading.set(address.key, pending);
    }
    return pending;
  }

  /** Whether a read of the key is in flight. */
  isReading(key: string): boolean {
    return this.#reading.has(key);
  }
}

/** A key's lookup in the store, with the entry under the policy in force and what was found. */
export interface StoreFinding {
  readonly lookup: StoreLookup;
  readonly current: CacheEntry | undefined;
  readonly found: StoreLookupResult;
}
