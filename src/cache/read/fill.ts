/**
 * One fill of a key from the origin, once for every request of every replica that wants it: the
 * coalescing lease across replicas (coordinator.ts), the origin's answer judged cacheable or not,
 * and the entry stored (docs/cache.md).
 *
 * A fill that refreshes an entry of the current generation (a background refresh, or a request
 * that found it stale) revalidates it (docs/cache.md#revalidation): it sends the upstream's
 * validators kept with it, and a 304, or a 200 whose body is byte for byte the stored one, only
 * freshens the stored entry (RFC 9111 §4.3.4): new times and validators, the body neither sent to
 * the store nor written again.
 */
import { BadGatewayError } from '../../errors/proxy-error.js';
import type { Metrics } from '../../observability/metrics.js';
import { createTurnGate } from '../../platform/turn-gate.js';
import type { CacheAddress } from '../entry/cache-key.js';
import { brotliBody, type CacheEntry, strongEtag } from '../entry/entry.js';
import { asOfMarks, headsOf } from '../entry/marks.js';
import type { L1Cache } from '../stores/l1.js';
import { type CacheStore, isCurrent, type StoreLookup } from '../stores/store.js';
import { type LifetimeEvidence, nextLifetime } from './auto-lifetime.js';
import type { AutoRefreshBudget } from './auto-refresh-budget.js';
import type { FillCoordinator, LeaseOutcome } from './coordinator.js';
import type { Origin, OriginAnswer, OriginFailure, ReadRequest, Validators } from './origin.js';
import type { EffectivePolicy } from './policy.js';
import { servedEntry } from './read-outcome.js';

/**
 * What a refresh of a stored entry learnt (`slab_proxy_revalidations_total`): the upstream answered
 * 304 (`not_modified`), or 200 with the stored body (`identical`), or with another answer (`modified`).
 */
export type Revalidation = 'not_modified' | 'identical' | 'modified';

/**
 * What one fill from the upstream learnt about its page, for whoever keeps the pages' change
 * history (docs/cache.md#freshness-advice): a first fill (`filled`: nothing was held), or a
 * refresh of the entry held and what the upstream said of it.
 */
export interface FillObservation {
  readonly address: CacheAddress;
  readonly outcome: Revalidation | 'filled';
  /** The entry refreshed: when it was stored (or last confirmed) and what it held. */
  readonly previous: CacheEntry | undefined;
  /** The upstream's `Last-Modified` in this answer (or kept from the entry on a 304 without one). */
  readonly lastModified: string | undefined;
  /** Body bytes the upstream sent (0 for a 304). */
  readonly bytes: number;
  /** When the answer came, ms since the epoch. */
  readonly at: number;
}

/** The result of one fill, as every request waiting on it sees it. */
export type Fill =
  | {
      readonly kind: 'entry';
      readonly entry: CacheEntry;
      /** Stored, or (a revalidation) the stored entry freshened. */
      readonly stored: boolean;
      readonly upstreamMs: number | undefined;
      readonly collapsed: boolean;
      /** Set when the fill refreshed an entry of the current generation it found stored. */
      readonly revalidation?: Revalidation | undefined;
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
  readonly metrics?: Pick<Metrics, 'revalidation'> | undefined;
  /** Told of every fill the upstream answered with a cacheable page or a 304. */
  readonly onFill?: ((observation: FillObservation) => void) | undefined;
  /** The ceiling on refreshes that automatic lifetimes start before `max` (absent: none). */
  readonly autoBudget?: Pick<AutoRefreshBudget, 'take'> | undefined;
}

/** Times a replica waits on another replica's lease before fetching regardless. */
const LEASE_ROUNDS = 2;
const SKIPPED: Fill = { kind: 'skipped' };
/** How long past its freshness a page fetched ahead is kept at least, ms (docs/cache.md#prefetch). */
const AHEAD_KEPT_MS = 60_000;

/**
 * The times of an entry stored at `storedAt` under the policy in force, and its own lifetime when
 * the policy gives pages theirs (auto-lifetime.ts).
 */
function timesFor(
  status: number,
  policy: EffectivePolicy,
  storedAt: number,
  autoLifetimeMs: number | undefined,
): Pick<CacheEntry, 'storedAt' | 'freshUntil' | 'keepUntil' | 'autoLifetimeMs'> {
  const ttlMs = autoLifetimeMs ?? (status === 200 ? policy.ttl : policy.notFoundTtl) * 1000;
  const freshUntil = storedAt + ttlMs;
  return {
    storedAt,
    freshUntil,
    keepUntil: freshUntil + Math.max(policy.staleWhileRevalidate, policy.staleIfError) * 1000,
    autoLifetimeMs,
  };
}

/**
 * The entry for a cacheable answer (a well-formed 200, or the 404 of a single record); a
 * prefetch's is flagged as fetched ahead until a request takes it (docs/cache.md#prefetch).
 */
function entryFor(
  answer: OriginAnswer,
  policy: EffectivePolicy,
  under: { readonly generation: string; readonly mark: string | undefined; readonly lifetimeMs: number | undefined },
  storedAt: number,
  ahead: boolean,
): CacheEntry {
  const etag = strongEtag(answer.body);
  const times = timesFor(answer.status, policy, storedAt, under.lifetimeMs);
  return {
    status: answer.status,
    contentType: answer.contentType ?? 'application/json',
    etag,
    body: answer.body,
    // Compressed once, here: the store keeps it, and `br` clients are sent it, this one included.
    brotli: brotliBody(answer.body, etag),
    ...times,
    // Kept a while past its freshness even without stale windows: the replica that fetched it
    // reads then whether a request took it (a longer keep serves nothing stale: the windows do).
    ...(ahead && { keepUntil: Math.max(times.keepUntil, times.freshUntil + AHEAD_KEPT_MS) }),
    generation: under.generation,
    upstreamEtag: answer.etag,
    lastModified: answer.lastModified,
    ...(ahead && { ahead: true }),
    // The marks read before the upstream was asked (marks.ts): a change announced since leaves it stale.
    ...(under.mark !== undefined && under.mark !== '' && { mark: under.mark }),
  };
}

/**
 * The stored entry revalidated at `at` (RFC 9111 §4.3.4): its response and body, the times of the
 * policy in force now, the validators the origin gave this time, and the page's marks read before
 * it was asked.
 */
function revalidated(
  current: CacheEntry,
  policy: EffectivePolicy,
  at: number,
  validators: Validators,
  mark: string | undefined,
  lifetimeMs: number | undefined,
): CacheEntry {
  return {
    ...current,
    mark: mark === undefined || mark === '' ? undefined : headsOf(mark),
    // A refresh is a request's (or a hit's): whatever was fetched ahead has been taken.
    ahead: undefined,
    ...timesFor(current.status, policy, at, lifetimeMs),
    upstreamEtag: validators.etag,
    lastModified: validators.lastModified,
  };
}

/** A 304 to a request that carried no validators: no answer to it (a bad gateway). */
export function unaskedNotModified(upstreamMs: number): OriginFailure {
  return { kind: 'failure', error: new BadGatewayError(), fwdStatus: 502, upstreamStatus: 304, upstreamMs };
}

/** Whether a 200 or 404 carries the very response stored: status, type and every body byte. */
function isSameAnswer(current: CacheEntry, answer: OriginAnswer): boolean {
  return (
    current.status === answer.status &&
    current.contentType === (answer.contentType ?? 'application/json') &&
    current.body.equals(answer.body)
  );
}

/** Leads (or joins) a key's fill as a background fill: the refresher's and the prefetcher's way to the origin. */
export type LeadBackgroundFill = (
  request: ReadRequest,
  address: CacheAddress,
  policy: EffectivePolicy,
  lookup: StoreLookup,
) => Promise<Fill>;

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
      let latest = lookup;
      if (waited.lease === 'acquired') {
        const again = await this.#filledMeanwhile(address, policy, lookup);
        if (again.kind === 'filled') return background ? SKIPPED : again.fill;
        latest = again.lookup;
      }
      return await this.#fetchAndStore(request, address, policy, latest, background);
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

  async #fetchAndStore(
    request: ReadRequest,
    address: CacheAddress,
    policy: EffectivePolicy,
    found: StoreLookup,
    background: boolean,
  ): Promise<Fill> {
    const { store, l1, fetch, now, metrics } = this.#options;
    // While the store cannot be asked, the L1 stands in for it: its copy is what is revalidated,
    // and what is fetched is held there (l1.ts).
    const standingIn = !found.available && l1 !== undefined;
    const lookup = standingIn ? l1.standIn(address.key, address.tag) : found;
    const generation = lookup.generation ?? (await store.ensureGeneration(address));
    if (lookup.generation === undefined && generation !== undefined) l1?.noteGeneration(address.tag, generation);
    // The entry this fill refreshes: the store's, of the current generation (a purged one is no
    // base to revalidate). Only a 200 is revalidated with its validators: a server evaluates a
    // precondition only for a 2xx (RFC 9110 §13.2.1); a record 404 can still be found identical.
    const current = isCurrent(lookup) ? lookup.entry : undefined;
    const validators: Validators | undefined =
      current?.status === 200 && (current.upstreamEtag !== undefined || current.lastModified !== undefined)
        ? { etag: current.upstreamEtag, lastModified: current.lastModified }
        : undefined;
    const outcome = await fetch(request, validators);
    if (outcome.kind === 'failure') return { kind: 'failure', outcome };
    if (outcome.kind === 'not-modified') {
      const { notModified } = outcome;
      // Only a request sent with validators has one (src/upstream/fetch-read.ts): else a bad answer.
      if (current === undefined) return { kind: 'failure', outcome: unaskedNotModified(notModified.elapsedMs) };
      // RFC 9111 §4.3.4: the stored validators are replaced by those the 304 carries, kept otherwise.
      const fresher = revalidated(
        current,
        policy,
        now(),
        {
          etag: notModified.etag ?? current.upstreamEtag,
          lastModified: notModified.lastModified ?? current.lastModified,
        },
        lookup.mark,
        this.#lifetime(
          current.status,
          policy,
          { kind: 'unchanged', previous: current },
          notModified.lastModified ?? current.lastModified,
        ),
      );
      this.#observe(address, 'not_modified', current, fresher.lastModified, 0);
      return this.#storeRevalidated(address, current, fresher, 'not_modified', notModified.elapsedMs, {
        standingIn,
        since: lookup.since,
      });
    }
    const { answer } = outcome;
    const cacheable = answer.status === 200 || (answer.status === 404 && request.read.kind === 'record');
    if (!cacheable) return { kind: 'private', answer };
    // A background refresh has no client waiting: its CPU work waits for a turn of its own, so
    // that a burst of refreshes never holds the hits queued behind it (src/platform/turn-gate.ts).
    if (background) await this.#backgroundTurn();
    // The stored response again, byte for byte (an upstream without validators, or one that
    // ignores them): freshened like a 304, with this answer's validators; nothing hashed,
    // compressed or written but the times.
    if (current !== undefined && isSameAnswer(current, answer)) {
      const validators = { etag: answer.etag, lastModified: answer.lastModified };
      const lifetimeMs = this.#lifetime(
        current.status,
        policy,
        { kind: 'unchanged', previous: current },
        answer.lastModified,
      );
      const fresher = revalidated(current, policy, now(), validators, lookup.mark, lifetimeMs);
      this.#observe(address, 'identical', current, answer.lastModified, answer.body.length);
      return this.#storeRevalidated(address, current, fresher, 'identical', answer.elapsedMs, {
        standingIn,
        since: lookup.since,
      });
    }
    // Without a generation (store unavailable) the answer is still shared, just not kept.
    const evidence: LifetimeEvidence =
      current === undefined ? { kind: 'first' } : { kind: 'changed', previous: current };
    const under = {
      generation: generation ?? '',
      mark: lookup.mark === undefined ? undefined : headsOf(lookup.mark),
      lifetimeMs: this.#lifetime(answer.status, policy, evidence, answer.lastModified),
    };
    const entry = entryFor(answer, policy, under, now(), request.prefetch !== undefined);
    const storable = generation !== undefined && entry.freshUntil > entry.storedAt;
    // `stored` in Cache-Status means stored (RFC 9211 §2.7): only once the store said so.
    const stored = storable && (await store.save(address, entry));
    if (stored || (storable && standingIn)) l1?.set(address.key, entry, lookup.since);
    if (current !== undefined) metrics?.revalidation('modified');
    this.#observe(
      address,
      current === undefined ? 'filled' : 'modified',
      current,
      answer.lastModified,
      answer.body.length,
    );
    return {
      kind: 'entry',
      entry,
      stored,
      upstreamMs: answer.elapsedMs,
      collapsed: false,
      revalidation: current === undefined ? undefined : 'modified',
    };
  }

  /**
   * A page's own lifetime under a policy with automatic lifetimes (auto-lifetime.ts), ms; none
   * otherwise, and none for a 404. A lifetime shorter than the policy's `ttl` takes a token of the
   * ceiling (auto-refresh-budget.ts): without one the page lives `ttl`, so automatic lifetimes cost
   * the upstream no more than the fixed `ttl` would, plus the ceiling's refreshes a second.
   */
  #lifetime(
    status: number,
    policy: EffectivePolicy,
    evidence: LifetimeEvidence,
    lastModified: string | undefined,
  ): number | undefined {
    const bounds = policy.autoTtl;
    if (bounds === undefined || status !== 200) return undefined;
    const ttlMs = policy.ttl * 1000;
    const lifetime = nextLifetime(evidence, lastModified, this.#options.now(), ttlMs, bounds);
    return lifetime >= ttlMs || this.#options.autoBudget?.take() !== false ? lifetime : ttlMs;
  }

  #observe(
    address: CacheAddress,
    outcome: FillObservation['outcome'],
    previous: CacheEntry | undefined,
    lastModified: string | undefined,
    bytes: number,
  ): void {
    this.#options.onFill?.({ address, outcome, previous, lastModified, bytes, at: this.#options.now() });
  }

  /**
   * The stored entry freshened: in the store when it is still the one this fill read (another
   * fill or freshen that came first is newer, and is left as it is; this request is still served
   * the freshened copy, which the origin has just confirmed); saved whole when it has gone meanwhile
   * (expired or evicted: the body is at hand, and the next request would otherwise fetch it).
   */
  async #storeRevalidated(
    address: CacheAddress,
    current: CacheEntry,
    fresher: CacheEntry,
    revalidation: Revalidation,
    upstreamMs: number,
    copy: { readonly standingIn: boolean; readonly since: number | undefined },
  ): Promise<Fill> {
    const { store, l1, metrics } = this.#options;
    const { standingIn } = copy;
    metrics?.revalidation(revalidation);
    let stored = false;
    // A policy of ttl 0 (caching turned off since) keeps nothing, as for any fill.
    const keepable = fresher.freshUntil > fresher.storedAt;
    if (keepable) {
      const result = await store.freshen(address, current, fresher);
      stored = result === 'freshened' || (result === 'missing' && (await store.save(address, fresher)));
    }
    if (stored || (keepable && standingIn)) l1?.set(address.key, fresher, copy.since);
    return { kind: 'entry', entry: fresher, stored, upstreamMs, collapsed: false, revalidation };
  }
}
