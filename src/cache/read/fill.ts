/**
 * One fill of a key from the origin, once for every request of every replica that wants it: the
 * coalescing lease across replicas (coordinator.ts), and the store read again before the origin is
 * asked; the asking and storing itself is fetch-and-store.ts's (docs/cache.md).
 */
import type { CacheAddress } from '../entry/cache-key.js';
import type { CacheEntry } from '../entry/entry.js';
import { asOfMarks } from '../entry/marks.js';
import { isCurrent, type StoreLookup } from '../stores/store.js';
import type { FillCoordinator, LeaseOutcome } from './coordinator.js';
import { FetchAndStore, type FetchAndStoreOptions } from './fetch-and-store.js';
import type { Fill } from './fill-result.js';
import type { ReadRequest } from './origin.js';
import type { EffectivePolicy } from './policy.js';
import { servedEntry } from './read-outcome.js';

export interface FillerOptions extends FetchAndStoreOptions {
  readonly coordinator: FillCoordinator;
  /** How long a replica waits for another replica's fill before looking again, ms. */
  readonly coalesceWaitMs: number;
}

/** Times a replica waits on another replica's lease before fetching regardless. */
const LEASE_ROUNDS = 2;
const SKIPPED: Fill = { kind: 'skipped' };

/** Fills keys from the origin, one request for the replicas between them. */
export class Filler {
  readonly #options: FillerOptions;
  readonly #fetchAndStore: FetchAndStore;

  constructor(options: FillerOptions) {
    this.#options = options;
    this.#fetchAndStore = new FetchAndStore(options);
  }

  /** Asks the origin for this key once, for every request of every replica that wants it. */
  async fill(
    request: ReadRequest,
    address: CacheAddress,
    policy: EffectivePolicy,
    lookup: StoreLookup,
    background: boolean,
  ): Promise<Fill> {
    const { coordinator } = this.#options;
    const lease = lookup.available ? await coordinator.tryLease(address) : 'unavailable';
    const waited = await this.#waitForOtherReplicas(request, address, lease, background);
    if (waited.kind === 'filled') return waited.fill;
    try {
      let latest = lookup;
      if (waited.lease === 'acquired') {
        const again = await this.#filledMeanwhile(address, policy, lookup);
        if (again.kind === 'filled') return background ? SKIPPED : again.fill;
        latest = again.lookup;
      }
      return await this.#fetchAndStore.run(request, address, policy, latest, background);
    } finally {
      // Not awaited: the answer never waits for Redis bookkeeping (the release never rejects).
      if (waited.lease === 'acquired') void coordinator.release(address);
    }
  }

  /**
   * Another replica is fetching: waits for its fill. If it stored nothing (its answer was its own,
   * or it died), takes the lease again, so that the replicas still make one request between them;
   * after two rounds, fetches regardless. A background refresh stands down at once.
   */
  async #waitForOtherReplicas(
    request: ReadRequest,
    address: CacheAddress,
    first: LeaseOutcome,
    background: boolean,
  ): Promise<{ readonly kind: 'filled'; readonly fill: Fill } | { readonly kind: 'go'; readonly lease: LeaseOutcome }> {
    const { coordinator, store, now, coalesceWaitMs } = this.#options;
    let lease = first;
    for (let round = 0; lease === 'held' && round < LEASE_ROUNDS; round++) {
      if (background) return { kind: 'filled', fill: SKIPPED };
      // The other replica's trace is not known here (nothing carries it through Redis): no link.
      const waiting = request.trace?.coalescedWait('replicas', undefined);
      await coordinator.waitForFill(address, coalesceWaitMs);
      const since = this.#options.l1?.sequence();
      const filled = { ...(await store.lookup(address)), since };
      const done = isCurrent(filled) && now() < asOfMarks(filled.entry, filled.mark).freshUntil;
      waiting?.end(done);
      if (done) return { kind: 'filled', fill: this.#filledElsewhere(address, filled) };
      lease = filled.available ? await coordinator.tryLease(address) : 'unavailable';
    }
    return { kind: 'go', lease };
  }

  /**
   * The lease was free, but another replica may have filled the key between this replica's lookup
   * and its lease (it stored, then released): read once more before asking the origin, so that
   * every key costs one upstream request, however the requests interleave. What was read is what
   * the fill then refreshes (its validators, and the entry a freshen expects to find).
   */
  async #filledMeanwhile(
    address: CacheAddress,
    policy: EffectivePolicy,
    lookup: StoreLookup,
  ): Promise<{ readonly kind: 'filled'; readonly fill: Fill } | { readonly kind: 'go'; readonly lookup: StoreLookup }> {
    const { store, now } = this.#options;
    const since = this.#options.l1?.sequence();
    const filled = { ...(await store.lookup(address)), since };
    const served = servedEntry(filled, policy);
    if (
      served === undefined ||
      !isCurrent(filled) ||
      now() >= served.freshUntil ||
      filled.entry.storedAt <= (lookup.entry?.storedAt ?? 0)
    )
      return { kind: 'go', lookup: filled.available ? filled : lookup };
    return { kind: 'filled', fill: this.#filledElsewhere(address, filled) };
  }

  /** Another fill's entry, found in the store: held in the L1 too, and shared as a collapsed fill. */
  #filledElsewhere(address: CacheAddress, filled: StoreLookup & { readonly entry: CacheEntry }): Fill {
    const { l1 } = this.#options;
    const { entry } = filled;
    l1?.noteGeneration(address.tag, filled.generation);
    l1?.set(address.key, entry, filled.since);
    return { kind: 'entry', entry, stored: false, upstreamMs: undefined, collapsed: true };
  }
}
