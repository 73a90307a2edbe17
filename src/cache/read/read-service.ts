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
 * copies held in this process (copies-in-process.ts), the fills in flight and the fill itself
 * (fill-serving.ts, fill.ts, fetch-and-store.ts), the background refreshes
 * (background-refresher.ts), the walks ahead (prefetcher.ts), and purges and invalidations
 * (group-changes.ts).
 */
import type { ResourceName } from '../../catalog/resources.js';
import type { ProxyError } from '../../errors/proxy-error.js';
import type { Metrics } from '../../observability/metrics.js';
import type { StoreLookupResult } from '../../observability/tracing.js';
import { AddressMemo } from '../entry/address-memo.js';
import type { CacheAddress } from '../entry/cache-key.js';
import type { CacheEntry } from '../entry/entry.js';
import { PrefetchLedger } from '../prefetch/prefetch-ledger.js';
import { Prefetcher } from '../prefetch/prefetcher.js';
import type { L1Cache } from '../stores/l1.js';
import type { CacheStore } from '../stores/store.js';
import type { AutoRefreshBudget } from './auto-refresh-budget.js';
import { BackgroundRefresher } from './background-refresher.js';
import type { FillCoordinator } from './coordinator.js';
import { CopiesInProcess } from './copies-in-process.js';
import type { FillObservation } from './fill-result.js';
import { FillServing } from './fill-serving.js';
import { GroupChanges } from './group-changes.js';
import type { Origin, ReadRequest } from './origin.js';
import { revalidatingUntil } from './page-lifetime.js';
import type { CachePolicies, EffectivePolicy } from './policy.js';
import type { PurgeBus } from './purge-bus.js';
import { fromEntry, type ReadOutcome, servedEntry, wholeSeconds } from './read-outcome.js';
import { type StoreFinding, StoreReads } from './store-reads.js';

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
  /** Told of every fill the upstream answered with a cacheable page or a 304 (fetch-and-store.ts). */
  readonly onFill?: (observation: FillObservation) => void;
  /** The ceiling on refreshes that automatic lifetimes start before `max` (auto-refresh-budget.ts). */
  readonly autoBudget?: Pick<AutoRefreshBudget, 'take'>;
  /** Told of each list page filled that broke the keyset rule (src/cache/entry/page-window.ts). */
  readonly onWindowless?: (address: CacheAddress) => void;
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

export function createReadService(options: ReadServiceOptions): ReadService {
  return new CacheReadService(options);
}

class CacheReadService implements ReadService {
  readonly #options: ReadServiceOptions;
  readonly #now: () => number;
  readonly #addresses: AddressMemo;
  readonly #reads: StoreReads;
  readonly #copies: CopiesInProcess;
  readonly #fills: FillServing;
  readonly #refresher: BackgroundRefresher;
  readonly #prefetcher: Prefetcher;
  readonly #changes: GroupChanges;

  constructor(options: ReadServiceOptions) {
    const now = options.now ?? Date.now;
    const { l1 } = options;
    this.#options = options;
    this.#now = now;
    this.#addresses = new AddressMemo(options.keyPrefix);
    this.#reads = new StoreReads(options.store, l1 && (() => l1.sequence()));
    this.#copies = new CopiesInProcess({ store: options.store, l1, reads: this.#reads, now });
    this.#fills = new FillServing({
      ...options,
      now,
      served: (request, address, policy, entry) => this.#prefetcher.served(request, address, policy, entry),
    });
    this.#refresher = new BackgroundRefresher({
      ahead: options.refreshAhead ?? 0,
      maxRunning: options.maxBackgroundRefreshes ?? Number.POSITIVE_INFINITY,
      reads: this.#reads,
      l1,
      filling: (key) => this.#fills.isFilling(key),
      lead: this.#fills.lead,
      onRefresh: options.onBackgroundRefresh,
    });
    this.#prefetcher = this.#createPrefetcher(options);
    this.#changes = new GroupChanges({ ...options, now });
    // A page filled by any replica: a copy held here is confirmed at its next hit, and takes the
    // newer entry before its own freshness runs out (l1.ts, `supersede`).
    if (l1 !== undefined) options.coordinator.onFilled((key) => l1.supersede(key));
  }

  #createPrefetcher(options: ReadServiceOptions): Prefetcher {
    const settings = options.prefetch ?? { depth: 2, maxConcurrent: 4, maxPerCompany: 2 };
    const metrics = options.metrics;
    return new Prefetcher({
      depth: settings.depth,
      ledger: new PrefetchLedger({ maxInFlight: settings.maxConcurrent, maxPerCompany: settings.maxPerCompany }),
      addressOf: (request) => this.#addressOf(request),
      held: (address, policy) => this.#copies.fresh(address, policy),
      filling: (key) => this.#fills.isFilling(key),
      reads: this.#reads,
      takeAhead: (address) => options.store.takeAhead(address),
      lead: this.#fills.lead,
      now: this.#now,
      count: metrics === undefined ? undefined : (result) => metrics.prefetch(result),
      onWalk: options.onPrefetch,
    });
  }

  purge(company: string, resource?: ResourceName): Promise<boolean> {
    return this.#changes.purge(company, resource);
  }

  invalidate(company: string, resource: ResourceName | undefined, records?: readonly string[]): Promise<boolean> {
    return this.#changes.invalidate(company, resource, records);
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
    const finding = await this.#lookUp(request, address, policy);
    const stored = this.#serveStored(request, address, policy, finding);
    return stored ?? this.#fills.serve(request, address, policy, finding);
  }

  #addressOf(request: ReadRequest): { readonly policy: EffectivePolicy; readonly address: CacheAddress } {
    const policy = this.#options.policies.policyFor(request.read.resource.name);
    return { policy, address: this.#addresses.address(request.read, request.principal, policy.partition) };
  }

  /** A fresh copy held in this process, served (copies-in-process.ts). */
  #hotHit(request: ReadRequest, address: CacheAddress, policy: EffectivePolicy): ReadOutcome | undefined {
    const entry = this.#copies.copy(address, policy);
    if (entry === undefined) return undefined;
    const at = this.#now();
    if (at >= entry.freshUntil) return this.#staleHit(request, address, policy, entry, at);
    this.#copies.confirmIfDue(address, policy);
    if (this.#refresher.isDue(address.key, entry, at)) this.#refresher.refreshAhead(request, address, policy, entry);
    this.#prefetcher.served(request, address, policy, entry);
    return fromEntry(entry, at, { kind: 'hit', ttl: wholeSeconds(entry.freshUntil - at) });
  }

  /**
   * A copy held in this process past its freshness, within its stale window: served at once while
   * one background refresh runs, as the store's copy would be (`#serveStored`), without a store read
   * per request: the refresh reads the store once it holds the lease. Past the window, `undefined`:
   * the request reads the store.
   */
  #staleHit(
    request: ReadRequest,
    address: CacheAddress,
    policy: EffectivePolicy,
    entry: CacheEntry,
    at: number,
  ): ReadOutcome | undefined {
    if (at >= this.#revalidatingUntil(entry, policy)) return undefined;
    const held = this.#copies.held(address);
    if (held === undefined) return undefined;
    this.#refresher.refresh(request, address, policy, held);
    return fromEntry(entry, at, { kind: 'revalidating', ttl: wholeSeconds(entry.freshUntil - at) });
  }

  /**
   * The store's copy, looked up even while a fill runs: a stale copy is served at once during a
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
    if (at < this.#revalidatingUntil(current, policy)) {
      this.#refresher.refresh(request, address, policy, lookup);
      return fromEntry(current, at, { kind: 'revalidating', ttl: wholeSeconds(current.freshUntil - at) });
    }
    return undefined;
  }

  /**
   * Until when an entry past its freshness is served while one refresh runs (`revalidatingUntil`,
   * page-lifetime.ts): its stale-while-revalidate window, shorter for a page with a lifetime of its
   * own, and at most `cache.invalidation.staleFor` for a page the system of record said changed.
   */
  #revalidatingUntil(entry: CacheEntry, policy: EffectivePolicy): number {
    return revalidatingUntil(entry, policy, this.#options.invalidatedStaleForMs);
  }
}
