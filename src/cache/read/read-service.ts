/**
 * The read service: what the data plane calls once a read is authenticated, authorised and
 * canonical (docs/architecture.md#the-request-flow, §6). It serves from the cache (L1, then the
 * store), coalesces misses into one upstream request per key in the process and across replicas,
 * serves stale while one background refresh runs, and serves stale when the upstream fails or
 * answers 429.
 *
 *   L1 hit (fresh, current generation)            → hit
 *   store hit (fresh)                             → hit, into L1
 *     either, past the page's refresh-ahead point → hit, one background refresh (refresh-ahead.ts)
 *   store stale, within staleWhileRevalidate      → hit (revalidating), one background refresh
 *   otherwise                                     → one fill per key (leader); others collapse
 *     fill: 200 / record 404                      → stored, shared with every waiter
 *           failure (refused, deadline, 5xx, bad) → shared; each serves stale within staleIfError
 *           401 / 403 / 429 / other 4xx           → the leader's alone; each waiter fetches itself
 *
 * Its parts, each the owner of one piece of state: the store reads in flight (store-reads.ts), the
 * fills in flight (fill-table.ts), the fill itself with its lease (fill.ts), and the background
 * refreshes (background-refresher.ts).
 */
import { RESOURCE_NAMES, type ResourceName } from '../../catalog/resources.js';
import type { ProxyError } from '../../errors/proxy-error.js';
import type { Metrics } from '../../observability/metrics.js';
import type { StoreLookupResult } from '../../observability/tracing.js';
import { AddressMemo } from '../entry/address-memo.js';
import { type CacheAddress, groupTag, markKeys } from '../entry/cache-key.js';
import type { CacheEntry } from '../entry/entry.js';
import { newMark } from '../entry/marks.js';
import { PrefetchLedger } from '../prefetch/prefetch-ledger.js';
import { Prefetcher } from '../prefetch/prefetcher.js';
import type { L1Cache } from '../stores/l1.js';
import type { CacheStore, StoreLookup } from '../stores/store.js';
import type { AutoRefreshBudget } from './auto-refresh-budget.js';
import { BackgroundRefresher } from './background-refresher.js';
import type { FillCoordinator } from './coordinator.js';
import { type Fill, Filler, type FillObservation, unaskedNotModified } from './fill.js';
import { FillTable, type Joined } from './fill-table.js';
import type { Origin, OriginAnswer, OriginFailure, ReadRequest } from './origin.js';
import type { CachePolicies, EffectivePolicy } from './policy.js';
import { createLocalPurgeBus, type PurgeBus } from './purge-bus.js';
import {
  fromAnswer,
  fromEntry,
  lifetimeMs,
  type ReadOutcome,
  servedEntry,
  staleIfError,
  wholeSeconds,
  withPolicy,
} from './read-outcome.js';
import { StoreReads } from './store-reads.js';

export type { ReadRequest };

export interface ReadService {
  serve(request: ReadRequest): Promise<ReadOutcome | ProxyError>;
  /**
   * A fresh hit held in this process (the L1, or an in-process store), synchronously; `undefined`
   * when `serve` must run. The hit path of the data plane tries this first.
   */
  serveHot(request: ReadRequest): ReadOutcome | undefined;
  /**
   * Makes every entry of the company (or of one of its resources) a miss on every replica: a new
   * generation in the store, and every replica's L1 copies dropped at once (the purge bus).
   * Resolves false when the store or the bus could not be reached.
   */
  purge(company: string, resource?: ResourceName): Promise<boolean>;
  /**
   * Soft invalidation (docs/cache.md#soft-invalidation): the company's list pages of the resource
   * (of every resource when none is named), and the pages of the records named (of every record
   * when none is), stale at once on every replica: each is served while one conditional refresh
   * runs. Resolves false when the store or the bus could not be reached.
   */
  invalidate(company: string, resource: ResourceName | undefined, records?: readonly string[]): Promise<boolean>;
}

export interface ReadServiceOptions {
  readonly store: CacheStore;
  /** In front of a remote store only. */
  readonly l1: L1Cache | undefined;
  readonly coordinator: FillCoordinator;
  readonly policies: CachePolicies;
  readonly keyPrefix: string;
  readonly fetch: Origin;
  /** How long a replica waits for another replica's fill before fetching itself, ms. */
  readonly coalesceWaitMs: number;
  readonly now?: () => number;
  readonly metrics?: Pick<
    Metrics,
    'coalesced' | 'l1Lookup' | 'storeLookup' | 'revalidation' | 'prefetch' | 'invalidation'
  >;
  /** Told of every fill the upstream answered with a cacheable page or a 304 (fill.ts). */
  readonly onFill?: (observation: FillObservation) => void;
  /** The ceiling on refreshes that automatic lifetimes start before `max` (auto-refresh-budget.ts). */
  readonly autoBudget?: Pick<AutoRefreshBudget, 'take'>;
  /** Background refreshes and their failures, for tests and metrics. */
  readonly onBackgroundRefresh?: (settled: Promise<void>) => void;
  /** How purges reach the other replicas (default: this process only). */
  readonly purges?: PurgeBus;
  /**
   * The last fraction of a page's freshness in which a hit refreshes it in the background, at a
   * point of its own (refresh-ahead.ts); 0 (the default here): only once stale.
   */
  readonly refreshAhead?: number;
  /**
   * How long after an invalidation a page's stored copy is still served while its refresh runs, ms
   * (`cache.invalidation.staleFor`; default: the policy's stale-while-revalidate alone).
   */
  readonly invalidatedStaleForMs?: number;
  /** Background refreshes running at once in this process, at most (default: no bound). */
  readonly maxBackgroundRefreshes?: number;
  /**
   * Next-page prefetch for the resources whose policy turns it on (prefetcher.ts); default: depth
   * 2, 4 in flight, 2 per company.
   */
  readonly prefetch?: { readonly depth: number; readonly maxConcurrent: number; readonly maxPerCompany: number };
  /** Walks ahead of keyset walkers, settled when over (tests). */
  readonly onPrefetch?: (settled: Promise<void>) => void;
}

/**
 * How long an entry filled under a policy may be kept at most, ms: its longest freshness and stale
 * window, and the minute a page fetched ahead is kept past its freshness (fill.ts). A record's
 * invalidation mark lives that long: by then every entry filled before it has gone.
 */
function keptFor(policy: EffectivePolicy): number {
  const fresh = Math.max(policy.ttl, policy.notFoundTtl, policy.autoTtl?.max ?? 0);
  return (fresh + Math.max(policy.staleWhileRevalidate, policy.staleIfError) + 60) * 1000;
}

/** Fills a request joins or leads before it fetches with its own token regardless. */
const MAX_JOIN_ATTEMPTS = 3;

/** A key's lookup in the store, with the entry under the policy in force and what was found. */
interface StoreFinding {
  readonly lookup: StoreLookup;
  readonly current: CacheEntry | undefined;
  readonly found: StoreLookupResult;
}

export function createReadService(options: ReadServiceOptions): ReadService {
  return new CacheReadService(options);
}

class CacheReadService implements ReadService {
  readonly #options: ReadServiceOptions;
  readonly #now: () => number;
  readonly #reads: StoreReads;
  readonly #fills = new FillTable();
  readonly #filler: Filler;
  readonly #refresher: BackgroundRefresher;
  readonly #prefetcher: Prefetcher;
  readonly #purges: PurgeBus;
  readonly #addresses: AddressMemo;

  constructor(options: ReadServiceOptions) {
    this.#options = options;
    this.#addresses = new AddressMemo(options.keyPrefix);
    this.#now = options.now ?? Date.now;
    const { l1 } = options;
    this.#reads = new StoreReads(options.store, l1 && (() => l1.sequence()));
    this.#filler = new Filler({ ...options, now: this.#now });
    this.#refresher = new BackgroundRefresher({
      ahead: options.refreshAhead ?? 0,
      maxRunning: options.maxBackgroundRefreshes ?? Number.POSITIVE_INFINITY,
      reads: this.#reads,
      l1: options.l1,
      filling: (key) => this.#fills.has(key),
      lead: (request, address, policy, lookup) => this.#joinOrLead(request, address, policy, lookup, true).fill,
      onRefresh: options.onBackgroundRefresh,
    });
    this.#prefetcher = this.#createPrefetcher(options);
    this.#purges = options.purges ?? createLocalPurgeBus();
    // The cache subscribes to its own announcements: a replica's L1 never serves a group purged
    // anywhere, nor a copy set before an invalidation of its group.
    this.#purges.subscribe((announcement) => {
      const { l1 } = options;
      if (l1 === undefined) return;
      for (const name of announcement.resource === undefined ? RESOURCE_NAMES : [announcement.resource]) {
        const tag = groupTag({ company: announcement.company, resource: name });
        if (announcement.kind === 'purge') l1.forgetGroup(tag);
        else l1.markGroup(tag, announcement.mark);
      }
    });
  }

  #createPrefetcher(options: ReadServiceOptions): Prefetcher {
    const settings = options.prefetch ?? { depth: 2, maxConcurrent: 4, maxPerCompany: 2 };
    const metrics = options.metrics;
    return new Prefetcher({
      depth: settings.depth,
      ledger: new PrefetchLedger({ maxInFlight: settings.maxConcurrent, maxPerCompany: settings.maxPerCompany }),
      addressOf: (request) => this.#addressOf(request),
      held: (address, policy) => this.#freshCopy(address, policy),
      filling: (key) => this.#fills.has(key),
      reads: this.#reads,
      takeAhead: (address) => options.store.takeAhead(address),
      lead: (request, address, policy, lookup) => this.#joinOrLead(request, address, policy, lookup, true).fill,
      now: this.#now,
      count: metrics === undefined ? undefined : (result) => metrics.prefetch(result),
      onWalk: options.onPrefetch,
    });
  }

  async purge(company: string, resource?: ResourceName): Promise<boolean> {
    const groups = (resource === undefined ? RESOURCE_NAMES : [resource]).map((name) => ({ company, resource: name }));
    const generations = await Promise.all(groups.map((group) => this.#options.store.purge(group)));
    // Announced after the new generation is stored: a replica that drops its L1 copy then reads
    // the new generation, never the old one again.
    const announced = await this.#purges.announce({ kind: 'purge', company, resource });
    return announced && generations.every((g) => g !== undefined);
  }

  async invalidate(company: string, resource: ResourceName | undefined, records?: readonly string[]): Promise<boolean> {
    const { store, policies, keyPrefix } = this.#options;
    const names = resource === undefined ? RESOURCE_NAMES : [resource];
    const mark = newMark(this.#now());
    const stored = await Promise.all(
      names.map((name) => {
        const group = { company, resource: name };
        const keepMs = keptFor(policies.policyFor(name));
        return store.invalidate({ keys: markKeys(keyPrefix, group), mark, records, keepMs });
      }),
    );
    // Announced after the marks are stored: a replica that stops serving its L1 copies reads them.
    const announced = await this.#purges.announce({ kind: 'invalidate', company, resource, mark });
    this.#options.metrics?.invalidation(records === undefined ? 'resource' : 'records');
    return announced && stored.every(Boolean);
  }

  serveHot(request: ReadRequest): ReadOutcome | undefined {
    const { policy, address } = this.#addressOf(request);
    const hot = this.#hotHit(request, address, policy);
    // Counted here, where the data plane asks first; `serve` asks again only after a miss.
    if (this.#options.l1 !== undefined) this.#options.metrics?.l1Lookup(hot !== undefined);
    return hot;
  }

  async serve(request: ReadRequest): Promise<ReadOutcome | ProxyError> {
    const { policy, address } = this.#addressOf(request);
    const hot = this.#hotHit(request, address, policy);
    if (hot !== undefined) return hot;
    const looked = await this.#lookUp(request, address, policy);
    const held = this.#serveStored(request, address, policy, looked);
    return held ?? this.#serveByFill(request, address, policy, looked);
  }

  #addressOf(request: ReadRequest): { readonly policy: EffectivePolicy; readonly address: CacheAddress } {
    const policy = this.#options.policies.policyFor(request.read.resource.name);
    return { policy, address: this.#addresses.address(request.read, request.principal, policy.partition) };
  }

  /**
   * A copy held in this process, under the policy in force: the L1 in front of a remote store, or
   * the store itself. An L1 copy whose lifetime ran out serves on while the store cannot be asked
   * for it (its node skipped after a failure), or, lapsed within a lifetime, while it is being read
   * for its key (a confirmation, or a request's lookup: a command timeout at most): no hit waits for
   * Redis, nor asks a Redis known not to answer (docs/cache.md#when-redis-fails).
   */
  #copyInProcess(address: CacheAddress, policy: EffectivePolicy): CacheEntry | undefined {
    const { l1, store } = this.#options;
    let entry: CacheEntry | undefined;
    if (l1 !== undefined) entry = l1.get(address.key, address.tag) ?? this.#lapsedCopy(l1, address);
    else if (store.peek !== undefined) return servedEntry(store.peek(address), policy);
    return entry === undefined ? undefined : withPolicy(entry, policy);
  }

  /** An L1 copy past its lifetime that may still serve now (`#copyInProcess`). */
  #lapsedCopy(l1: L1Cache, address: CacheAddress): CacheEntry | undefined {
    if (this.#options.store.reachable?.(address) === false) return l1.latest(address.key, address.tag);
    return this.#reads.isReading(address.key) ? l1.lapsed(address.key, address.tag) : undefined;
  }

  /** A fresh copy held in this process. */
  #freshCopy(address: CacheAddress, policy: EffectivePolicy): CacheEntry | undefined {
    const entry = this.#copyInProcess(address, policy);
    return entry !== undefined && this.#now() < entry.freshUntil ? entry : undefined;
  }

  /** A fresh entry held in this process, served. */
  #hotHit(request: ReadRequest, address: CacheAddress, policy: EffectivePolicy): ReadOutcome | undefined {
    const entry = this.#copyInProcess(address, policy);
    if (entry === undefined) return undefined;
    const at = this.#now();
    if (at >= entry.freshUntil) return undefined;
    const due = this.#options.l1?.dueForReread(address.key);
    if (due !== undefined && !this.#reads.isReading(address.key)) this.#rereadIntoL1(address, policy, due);
    if (this.#refresher.isDue(address.key, entry, at)) this.#refresher.refreshAhead(request, address, policy, entry);
    this.#prefetcher.served(request, address, policy, entry);
    return fromEntry(entry, at, { kind: 'hit', ttl: wholeSeconds(entry.freshUntil - at) });
  }

  /**
   * Confirms an L1 copy (as stored: the L1 holds entries as the store has them, the policy applied
   * per hit) against the store before the L1 lets it go (l1.ts, `dueForReread`): the copy is served
   * meanwhile, and kept for another L1 lifetime when the store still holds it (confirmed by its
   * stored prefix: no body read, nothing decoded), replaced by the store's newer one, or dropped
   * by a new generation. A hot page then never misses the L1, and no hit waits for Redis.
   */
  #rereadIntoL1(address: CacheAddress, policy: EffectivePolicy, held: CacheEntry): void {
    const { l1 } = this.#options;
    this.#reads.read(address, held).then(
      (lookup) => {
        // Unconfirmed because the store cannot be asked: the copy serves on (l1.ts).
        if (!lookup.available) return l1?.renew(address.key);
        l1?.noteGeneration(address.tag, lookup.generation);
        const served = servedEntry(lookup, policy);
        if (served === undefined || lookup.entry === undefined || this.#now() >= served.freshUntil) return;
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

  /**
   * The store's copy. StoreFinding up even while a fill runs: a stale copy is served at once during a
   * background refresh, and is the stale-if-error fallback of a request that joins a fill. The L1's
   * last copy of the page, if any, is what the store confirms by its stored prefix (a page read
   * again after an idle spell costs no body and no decoding); while the store cannot be asked, it
   * stands in for the store (l1.ts).
   */
  async #lookUp(request: ReadRequest, address: CacheAddress, policy: EffectivePolicy): Promise<StoreFinding> {
    const looking = request.trace?.lookup();
    const { l1 } = this.#options;
    const stored = await this.#reads.read(address, l1?.latest(address.key, address.tag));
    if (stored.available) l1?.noteGeneration(address.tag, stored.generation);
    const lookup = stored.available || l1 === undefined ? stored : l1.standIn(address.key, address.tag);
    const current = servedEntry(lookup, policy);
    const found: StoreLookupResult = !lookup.available
      ? 'unavailable'
      : current === undefined
        ? 'miss'
        : this.#now() < current.freshUntil
          ? 'hit'
          : 'stale';
    looking?.end(found);
    this.#options.metrics?.storeLookup(found);
    return { lookup, current, found };
  }

  /** The store's copy served: fresh (into the L1), or stale while one refresh runs. */
  #serveStored(
    request: ReadRequest,
    address: CacheAddress,
    policy: EffectivePolicy,
    { lookup, current }: StoreFinding,
  ): ReadOutcome | undefined {
    if (current === undefined) return undefined;
    const at = this.#now();
    if (at < current.freshUntil) {
      // As stored (the hot path applies the policy in force to every hit): the copy is confirmed
      // against the store by its stored form.
      if (lookup.entry !== undefined) this.#options.l1?.set(address.key, lookup.entry, lookup.since);
      if (this.#refresher.isDue(address.key, current, at)) this.#refresher.refresh(request, address, policy, lookup);
      this.#prefetcher.served(request, address, policy, current);
      return fromEntry(current, at, { kind: 'hit', ttl: wholeSeconds(current.freshUntil - at) });
    }
    if (at < current.freshUntil + this.#staleWindowMs(current, policy)) {
      this.#refresher.refresh(request, address, policy, lookup);
      return fromEntry(current, at, { kind: 'revalidating', ttl: wholeSeconds(current.freshUntil - at) });
    }
    return undefined;
  }

  /**
   * How long past its freshness an entry is served while one refresh runs: the policy's
   * stale-while-revalidate, or, for a page the system of record said changed, at most
   * `cache.invalidation.staleFor`: a hot page is read again within it and refreshed without a
   * wait, and a page read later waits for its (conditional) refresh rather than being served a
   * copy known to be that old.
   */
  #staleWindowMs(entry: CacheEntry, policy: EffectivePolicy): number {
    let window = policy.staleWhileRevalidate * 1000;
    // A page with a lifetime of its own is not served staler than that lifetime: one that changes
    // every few seconds waits for its refresh rather than be served tens of seconds old.
    if (policy.autoTtl !== undefined) window = Math.min(window, lifetimeMs(entry, policy));
    return entry.invalidatedAt === undefined ? window : Math.min(window, this.#options.invalidatedStaleForMs ?? window);
  }

  /** One fill for the key, led or joined; the leader's private answer is its own (the others try again). */
  async #serveByFill(
    request: ReadRequest,
    address: CacheAddress,
    policy: EffectivePolicy,
    { lookup, current }: StoreFinding,
  ): Promise<ReadOutcome | ProxyError> {
    /** A failure, or a 429 (docs/limits.md#the-upstream-guard), is answered with the stale copy while staleIfError allows. */
    const failed = (failure: OriginFailure): ReadOutcome | ProxyError =>
      staleIfError(current, policy, this.#now(), failure.fwdStatus, failure.upstreamMs) ?? failure.error;
    const passOn = (answer: OriginAnswer): ReadOutcome =>
      (answer.status === 429 ? staleIfError(current, policy, this.#now(), 429, answer.elapsedMs) : undefined) ??
      fromAnswer(answer);

    for (let attempt = 0; attempt < MAX_JOIN_ATTEMPTS; attempt++) {
      const joined = this.#joinOrLead(request, address, policy, lookup);
      const result = await this.#awaitFill(request, joined);
      if (result.kind === 'entry') {
        this.#prefetcher.served(request, address, policy, result.entry);
        return this.#fromFill(result, joined.leader, policy);
      }
      // A prefetch's refusal (no upstream slot to spare) is no answer for a client that joined it.
      if (result.kind === 'failure' && result.outcome.spareRefused !== true) return failed(result.outcome);
      if (result.kind === 'failure') continue;
      if (result.kind === 'private' && joined.leader) return passOn(result.answer);
      // The leader's 401/403/429 was its own, or a background refresh stood down: this request
      // tries again with its own token (docs/cache.md), leading or joining the next fill.
    }
    // Unconditional: a 304 to it is no answer (src/upstream/fetch-read.ts makes it a failure).
    const own = await this.#options.fetch(request);
    if (own.kind === 'not-modified') return failed(unaskedNotModified(own.notModified.elapsedMs));
    return own.kind === 'failure' ? failed(own) : passOn(own.answer);
  }

  /**
   * A follower in this process waits on the leader's fill: its span links to the leader's request,
   * whose trace holds the upstream exchange (OpenTelemetry links: a causal relation between traces;
   * the follower's own trace stays its client's).
   */
  async #awaitFill(request: ReadRequest, joined: Joined): Promise<Fill> {
    const waiting = joined.leader ? undefined : request.trace?.coalescedWait('process', joined.leaderTrace);
    let result: Fill;
    try {
      result = await joined.fill;
    } catch (error) {
      waiting?.end(false);
      throw error;
    }
    waiting?.end(result.kind === 'entry' || result.kind === 'failure');
    return result;
  }

  #fromFill(result: Extract<Fill, { kind: 'entry' }>, leader: boolean, policy: EffectivePolicy): ReadOutcome {
    const collapsed = !leader || result.collapsed;
    if (collapsed) this.#options.metrics?.coalesced(leader ? 'replicas' : 'process');
    // A refresh of a stored entry forwarded a stale one (RFC 9211 §2.2: `fwd=stale`), and a 304
    // is what the upstream answered it (`fwd-status=304`), though the client gets the stored 200.
    const revalidated = result.revalidation !== undefined;
    const fwdStatus = result.revalidation === 'not_modified' ? 304 : result.entry.status;
    return fromEntry(
      // The policy in force now, as for every answer from an entry (another replica filled it).
      withPolicy(result.entry, policy),
      this.#now(),
      collapsed
        ? { kind: 'collapsed', fwdStatus, stale: revalidated }
        : { kind: 'miss', fwdStatus, stored: result.stored, stale: revalidated },
      // A follower waited on the leader's upstream exchange: that time is not the proxy's own.
      result.upstreamMs,
    );
  }

  #joinOrLead(
    request: ReadRequest,
    address: CacheAddress,
    policy: EffectivePolicy,
    lookup: StoreLookup,
    background = false,
  ): Joined {
    return this.#fills.joinOrLead(address.key, request, () =>
      this.#filler.fill(request, address, policy, lookup, background),
    );
  }
}
