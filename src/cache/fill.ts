/**
 * One fill of a key from the origin, once for every request of every replica that wants it: the
 * coalescing lease across replicas (coordinator.ts), the origin's answer judged cacheable or not,
 * and the entry stored (docs/cache.md).
 */
import { createTurnGate } from '../platform/turn-gate.js';
import type { CacheAddress } from './cache-key.js';
import type { FillCoordinator, LeaseOutcome } from './coordinator.js';
import { type CacheEntry, brotliBody, strongEtag } from './entry.js';
import type { L1Cache } from './l1.js';
import type { Origin, OriginAnswer, OriginFailure, ReadRequest } from './origin.js';
import type { EffectivePolicy } from './policy.js';
import { withPolicy } from './read-outcome.js';
import { type CacheStore, type StoreLookup, isCurrent } from './store.js';

/** The result of one fill, as every request waiting on it sees it. */
export type Fill =
  | {
      readonly kind: 'entry';
      readonly entry: CacheEntry;
      readonly stored: boolean;
      readonly upstreamMs: number | undefined;
      readonly collapsed: boolean;
    }
  | { readonly kind: 'failure'; readonly outcome: OriginFailure }
  /** 401/403/429/other 4xx: for the request whose token it was. */
  | { readonly kind: 'private'; readonly answer: OriginAnswer }
  /** A background refresh that another replica is already doing. */
  | { readonly kind: 'skipped' };

export interface FillerOptions {
  readonly store: CacheStore;
  readonly l1: L1Cache | undefined;
  readonly coordinator: FillCoordinator;
  readonly fetch: Origin;
  /** How long a replica waits for another replica's fill before looking again, ms. */
  readonly coalesceWaitMs: number;
  readonly now: () => number;
}

/** Times a replica waits on another replica's lease before fetching regardless. */
const LEASE_ROUNDS = 2;
const SKIPPED: Fill = { kind: 'skipped' };

/** The entry for a cacheable answer (a well-formed 200, or the 404 of a single record). */
function entryFor(answer: OriginAnswer, policy: EffectivePolicy, generation: string, storedAt: number): CacheEntry {
  const ttl = answer.status === 200 ? policy.ttl : policy.notFoundTtl;
  const freshUntil = storedAt + ttl * 1000;
  const etag = strongEtag(answer.body);
  return {
    status: answer.status,
    contentType: answer.contentType ?? 'application/json',
    etag,
    body: answer.body,
    // Compressed once, here: the store keeps it, and `br` clients are sent it, this one included.
    brotli: brotliBody(answer.body, etag),
    storedAt,
    freshUntil,
    keepUntil: freshUntil + Math.max(policy.staleWhileRevalidate, policy.staleIfError) * 1000,
    generation,
  };
}

/** Fills keys from the origin; owns the turn that background fills take for their CPU work. */
export class Filler {
  readonly #options: FillerOptions;
  /** A background fill's CPU work (validating, hashing, compressing) waits for a turn of its own. */
  readonly #backgroundTurn = createTurnGate();

  constructor(options: FillerOptions) {
    this.#options = options;
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
      if (waited.lease === 'acquired') {
        const filled = await this.#filledMeanwhile(address, policy, lookup);
        if (filled !== undefined) return background ? SKIPPED : filled;
      }
      return await this.#fetchAndStore(request, address, policy, lookup, background);
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
      const filled = await store.lookup(address);
      const done = isCurrent(filled) && now() < filled.entry.freshUntil;
      waiting?.end(done);
      if (done) return { kind: 'filled', fill: this.#filledElsewhere(address, filled.entry, filled.generation) };
      lease = filled.available ? await coordinator.tryLease(address) : 'unavailable';
    }
    return { kind: 'go', lease };
  }

  /**
   * The lease was free, but another replica may have filled the key between this replica's lookup
   * and its lease (it stored, then released): read once more before asking the origin, so that
   * every key costs one upstream request, however the requests interleave.
   */
  async #filledMeanwhile(
    address: CacheAddress,
    policy: EffectivePolicy,
    lookup: StoreLookup,
  ): Promise<Fill | undefined> {
    const { store, now } = this.#options;
    const filled = await store.lookup(address);
    if (
      !isCurrent(filled) ||
      now() >= withPolicy(filled.entry, policy).freshUntil ||
      filled.entry.storedAt <= (lookup.entry?.storedAt ?? 0)
    )
      return undefined;
    return this.#filledElsewhere(address, filled.entry, filled.generation);
  }

  /** Another fill's entry, found in the store: held in the L1 too, and shared as a collapsed fill. */
  #filledElsewhere(address: CacheAddress, entry: CacheEntry, generation: string | undefined): Fill {
    const { l1 } = this.#options;
    l1?.noteGeneration(address.tag, generation);
    l1?.set(address.key, entry);
    return { kind: 'entry', entry, stored: false, upstreamMs: undefined, collapsed: true };
  }

  async #fetchAndStore(
    request: ReadRequest,
    address: CacheAddress,
    policy: EffectivePolicy,
    lookup: StoreLookup,
    background: boolean,
  ): Promise<Fill> {
    const { store, l1, fetch, now } = this.#options;
    const generation = lookup.generation ?? (await store.ensureGeneration(address));
    if (lookup.generation === undefined && generation !== undefined) l1?.noteGeneration(address.tag, generation);
    const outcome = await fetch(request);
    if (outcome.kind === 'failure') return { kind: 'failure', outcome };
    const { answer } = outcome;
    const cacheable = answer.status === 200 || (answer.status === 404 && request.read.kind === 'record');
    if (!cacheable) return { kind: 'private', answer };
    // A background refresh has no client waiting: its CPU work waits for a turn of its own, so
    // that a burst of refreshes never holds the hits queued behind it (src/platform/turn-gate.ts).
    if (background) await this.#backgroundTurn();
    // Without a generation (store unavailable) the answer is still shared, just not kept.
    const entry = entryFor(answer, policy, generation ?? '', now());
    const storable = generation !== undefined && entry.freshUntil > entry.storedAt;
    // `stored` in Cache-Status means stored (RFC 9211 §2.7): only once the store said so.
    const stored = storable && (await store.save(address, entry));
    if (stored) l1?.set(address.key, entry);
    return { kind: 'entry', entry, stored, upstreamMs: answer.elapsedMs, collapsed: false };
  }
}
