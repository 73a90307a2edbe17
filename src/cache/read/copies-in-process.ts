/**
 * The copies of pages this process holds: the L1 in front of a remote store, or the store itself
 * when it is in-process; and the L1's copies confirmed against the store before they lapse, so that
 * a hot page never misses the L1 and no hit waits for Redis (docs/cache.md#when-redis-fails).
 */
import type { CacheAddress } from '../entry/cache-key.js';
import type { CacheEntry } from '../entry/entry.js';
import type { L1Cache } from '../stores/l1.js';
import { type CacheStore, lookupOfCopy, type StoreLookup } from '../stores/store.js';
import type { EffectivePolicy } from './policy.js';
import { servedEntry, withPolicy } from './read-outcome.js';
import type { StoreReads } from './store-reads.js';

export interface CopiesInProcessOptions {
  readonly store: CacheStore;
  /** In front of a remote store only. */
  readonly l1: L1Cache | undefined;
  readonly reads: StoreReads;
  readonly now: () => number;
}

export class CopiesInProcess {
  readonly #options: CopiesInProcessOptions;

  constructor(options: CopiesInProcessOptions) {
    this.#options = options;
  }

  /**
   * A copy held in this process, under the policy in force. An L1 copy whose lifetime ran out
   * serves on while the store cannot be asked for it (its node skipped after a failure), or,
   * lapsed within a lifetime, while it is being read for its key (a confirmation, or a request's
   * lookup: a command timeout at most): no hit waits for Redis, nor asks a Redis known not to answer.
   */
  copy(address: CacheAddress, policy: EffectivePolicy): CacheEntry | undefined {
    const { l1, store } = this.#options;
    let entry: CacheEntry | undefined;
    if (l1 !== undefined) entry = l1.get(address.key, address.tag) ?? this.#lapsedCopy(l1, address);
    else if (store.peek !== undefined) return servedEntry(store.peek(address), policy);
    return entry === undefined ? undefined : withPolicy(entry, policy);
  }

  /**
   * The copy held in this process as the store's answer it came from (the L1's, or the in-process
   * store's own): what a refresh started from it is given.
   */
  held(address: CacheAddress): StoreLookup | undefined {
    const { l1, store } = this.#options;
    if (l1 !== undefined) return l1.held(address.key, address.tag) ?? this.#lapsedLookup(l1, address);
    return store.peek?.(address);
  }

  /** A fresh copy held in this process. */
  fresh(address: CacheAddress, policy: EffectivePolicy): CacheEntry | undefined {
    const entry = this.copy(address, policy);
    return entry !== undefined && this.#options.now() < entry.freshUntil ? entry : undefined;
  }

  /** Starts the confirmation of the key's L1 copy when the L1 is about to let it go (l1.ts, `dueForReread`). */
  confirmIfDue(address: CacheAddress, policy: EffectivePolicy): void {
    const due = this.#options.l1?.dueForReread(address.key);
    if (due !== undefined && !this.#options.reads.isReading(address.key)) this.#confirm(address, policy, due);
  }

  /** An L1 copy past its lifetime that may still serve now (`copy`), as a lookup. */
  #lapsedLookup(l1: L1Cache, address: CacheAddress): StoreLookup | undefined {
    const entry = this.#lapsedCopy(l1, address);
    if (entry === undefined) return undefined;
    // While the store cannot be asked, the L1 stands in for it (l1.ts): the refresh then holds what it fetches here.
    if (this.#options.store.reachable?.(address) === false) return l1.standIn(address.key, address.tag);
    return lookupOfCopy(entry);
  }

  /** An L1 copy past its lifetime that may still serve now (`copy`). */
  #lapsedCopy(l1: L1Cache, address: CacheAddress): CacheEntry | undefined {
    if (this.#options.store.reachable?.(address) === false) return l1.latest(address.key, address.tag);
    return this.#options.reads.isReading(address.key) ? l1.lapsed(address.key, address.tag) : undefined;
  }

  /**
   * Confirms an L1 copy (as stored: the L1 holds entries as the store has them, the policy applied
   * per hit) against the store: the copy is served meanwhile, and kept for another L1 lifetime when
   * the store still holds it (confirmed by its stored prefix: no body read, nothing decoded),
   * replaced by the store's newer one, or dropped by a new generation.
   */
  #confirm(address: CacheAddress, policy: EffectivePolicy, held: CacheEntry): void {
    const { l1, reads, now } = this.#options;
    reads.read(address, held).then(
      (lookup) => {
        // Unconfirmed because the store cannot be asked: the copy serves on (l1.ts).
        if (!lookup.available) return l1?.renew(address.key);
        l1?.noteGeneration(address.tag, lookup.generation);
        const served = servedEntry(lookup, policy);
        if (served === undefined || lookup.entry === undefined || now() >= served.freshUntil) return;
        // Confirmed, the held object itself comes back and is kept: no new entry per L1 lifetime,
        // which would be old-generation garbage once a second for every hot page
        // (docs/architecture.md#why-the-hit-path-is-built-as-it-is). Read whole, the store's
        // entry replaces the copy, so that its stored form is the one confirmed next time (a page
        // taken since it was fetched ahead differs from its copy by a flag alone).
        l1?.set(address.key, lookup.entry, lookup.since);
      },
      () => undefined, // a failed read changes nothing: the copy expires as it would have
    );
  }
}
