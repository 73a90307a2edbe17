/**
 * Prometheus metrics (docs/operations.md#metrics), with `prom-client`, served on the admin port's `/metrics`.
 *
 * Labels are bounded by construction: a resource is one of the catalog's thirteen names (or
 * `other` for what the data plane does not take), a status is an HTTP status the proxy itself
 * sends, a cache result is one of five words, a policy one of four, a company one of at most ten
 * named for the life of the process or `other` (metrics/company-series.ts). Never a token, a
 * subject or a record id: those would grow without bound (and are not for a metrics scraper to
 * see).
 *
 * The per-request series (requests, their durations, L1 lookups) are counted in plain numbers and
 * handed to prom-client when scraped:
 * prom-client hashes and validates the label object on every `inc()` and `observe()`, hundreds of
 * times what a map lookup and two additions cost (docs/architecture.md#why-the-hit-path-is-built-as-it-is).
 * Everything off the hit path uses prom-client directly.
 *
 * The parts, in src/observability/metrics/: every metric's name, help and labels as one table
 * (definitions.ts), the registry that makes and renders them (registry.ts), and the hot path's
 * plain counts (hot-path.ts, over pending-counts.ts and recorded-histogram.ts).
 */

import { Registry } from 'prom-client';
import type { RateLimitPolicy } from '../errors/proxy-error.js';
import { type CompanyRanking, CompanyUsage } from './company-usage.js';
import { CompanySeries } from './metrics/company-series.js';
import {
  COALESCED_WAITS,
  GAUGES,
  INVALIDATIONS,
  INVALIDATIONS_REFUSED,
  L1_CHANNEL_GAPS,
  PREFETCHES,
  RATE_LIMITED,
  REDIS_ERRORS,
  REVALIDATIONS,
  type ScrapeSources,
  STORE_LOOKUPS,
  UPSTREAM_FILL_BYTES,
  UPSTREAM_REFUSALS,
  UPSTREAM_REQUESTS,
  UPSTREAM_SECONDS,
  WINDOWLESS_FILLS,
} from './metrics/definitions.js';
import { L1Lookups, RequestSeries } from './metrics/hot-path.js';
import { resourceLabel, statusLabel } from './metrics/labels.js';
import { MetricRegistry } from './metrics/registry.js';

export type { CacheFootprint, ResourceFreshnessReading } from './metrics/definitions.js';

/**
 * The `cache` label: what the cache did for a request (the cache's `CacheResult`, named here so that
 * this module, below the cache, depends on no domain); absent: not a read.
 */
export type CacheLabel = 'hit' | 'stale' | 'miss' | 'collapsed' | 'bypass';

export const METRICS_CONTENT_TYPE = Registry.PROMETHEUS_CONTENT_TYPE;

/** Where a Redis failure happened: the cache store and fills, the inbound limits, the upstream budget, the shared operator state. */
export type RedisComponent = 'cache' | 'limits' | 'budget' | 'control';
export type CoalesceScope = 'process' | 'replicas';
/** Why a fill did not reach the upstream: the budget's bound wait, the open breaker, a company's 429 pause. */
export type UpstreamRefusal = 'budget' | 'breaker' | 'paused';
/** What a refresh of a stored page learnt: 304, the same body in a 200, or another answer. */
export type RevalidationResult = 'not_modified' | 'identical' | 'modified';
/** A gap in the change channel (src/cache/read/change-channel.ts, where each is defined). */
export type ChannelGapLabel = 'skipped' | 'missed' | 'regressed' | 'failover';
/** Why changes sent to `POST /admin/cache/invalidate` were refused: the feed's bucket, or a batch larger than it. */
export type InvalidationRefusal = 'flood' | 'batch';
/** What became of a next page fetched ahead of a keyset walker (docs/cache.md#prefetch), or why none was. */
export type PrefetchResult =
  | 'started'
  | 'used'
  | 'wasted'
  | 'failed'
  | 'cached'
  | 'filling'
  | 'leased'
  | 'cap'
  | 'budget';

export interface Metrics {
  /** One per request the proxy answered on its API port; `company` once its credential was verified. */
  request(
    resource: string | undefined,
    status: number,
    cache: CacheLabel | undefined,
    seconds: number,
    company?: string,
  ): void;
  /** A resource's reads answered since the start (hits, stale, misses, collapsed): the freshness advice's. */
  readsOf(resource: string): number;
  /** A client fill's turn at the upstream budget (not a prefetch's): granted or refused, after waiting. */
  companySlot(company: string, granted: boolean, waitedSeconds: number): void;
  /** The `top` companies by requests to this replica, the rest summed (the admin API's `/admin/companies`). */
  companies(top: number): CompanyRanking;
  /** One per upstream exchange: its status, or `error` (refused, reset, deadline, bad answer). */
  upstream(resource: string, status: number | 'error', seconds: number): void;
  upstreamRefused(reason: UpstreamRefusal): void;
  /** A request that waited for another request's fill instead of asking the upstream. */
  coalesced(scope: CoalesceScope): void;
  /** A 429 the proxy answered, by the policy that refused. */
  rateLimited(policy: RateLimitPolicy): void;
  redisError(component: RedisComponent): void;
  l1Lookup(hit: boolean): void;
  /** A gap in the change channel (src/cache/read/change-channel.ts): the L1 confirms its copies. */
  l1ChannelGap(gap: ChannelGapLabel): void;
  storeLookup(result: 'hit' | 'stale' | 'miss' | 'unavailable'): void;
  /** A refresh of a stored page (docs/cache.md#revalidation), by what the upstream said. */
  revalidation(result: RevalidationResult): void;
  /** A next page fetched ahead of a walker, or not (docs/cache.md#prefetch). */
  prefetch(result: PrefetchResult): void;
  /** Body bytes the upstream sent for a fill of a cacheable page (0 for a 304). */
  upstreamFillBytes(resource: string, bytes: number): void;
  /** A soft invalidation taken (docs/cache.md#soft-invalidation), by its scope. */
  invalidation(scope: 'records' | 'resource'): void;
  /** Changes refused on `POST /admin/cache/invalidate` (docs/operations.md#the-change-feed), by why. */
  invalidationsRefused(reason: InvalidationRefusal, changes: number): void;
  /** A list page filled that broke the keyset rule (docs/cache.md#window-marks). */
  windowlessFill(resource: string): void;
  /**
   * What the gauges read at each scrape, given once the parts they read exist (added to what
   * `createMetrics` was given); before the first scrape.
   */
  watch(sources: ScrapeSources): void;
  /** Prometheus text for a scrape. */
  render(): Promise<string>;
}

export interface MetricsOptions extends ScrapeSources {
  /** Adds Node's process metrics (default true; the tests' many apps in one process share them). */
  readonly processMetrics?: boolean;
}

export function createMetrics(options: MetricsOptions = {}): Metrics {
  // Made in the order a scrape shows them.
  const registry = new MetricRegistry(options.processMetrics !== false);
  const requests = new RequestSeries(registry);
  const usage = new CompanyUsage();
  new CompanySeries(registry, usage);
  const upstreamRequests = registry.counter(UPSTREAM_REQUESTS);
  const upstreamSeconds = registry.histogram(UPSTREAM_SECONDS);
  const upstreamRefusals = registry.counter(UPSTREAM_REFUSALS);
  const coalesced = registry.counter(COALESCED_WAITS);
  const rateLimited = registry.counter(RATE_LIMITED);
  const redisErrors = registry.counter(REDIS_ERRORS);
  const l1Lookups = new L1Lookups(registry);
  const channelGaps = registry.counter(L1_CHANNEL_GAPS);
  const storeLookups = registry.counter(STORE_LOOKUPS);
  const revalidations = registry.counter(REVALIDATIONS);
  const prefetches = registry.counter(PREFETCHES);
  const fillBytes = registry.counter(UPSTREAM_FILL_BYTES);
  const invalidations = registry.counter(INVALIDATIONS);
  const invalidationsRefused = registry.counter(INVALIDATIONS_REFUSED);
  const windowless = registry.counter(WINDOWLESS_FILLS);
  // The gauges are made at the first scrape, from every source given by then.
  let sources: ScrapeSources = options;
  let gauged = false;
  const gauge = (): void => {
    if (gauged) return;
    gauged = true;
    for (const definition of GAUGES) {
      const read = definition.read(sources);
      if (read !== undefined) registry.gauge(definition, read);
    }
  };

  return {
    request(resource, status, cache, seconds, company) {
      requests.record(resource, status, cache, seconds);
      if (company !== undefined) usage.request(company, cache);
    },
    readsOf: (resource) => requests.readsOf(resource),
    companySlot: (company, granted, waitedSeconds) => usage.slot(company, granted, waitedSeconds * 1000),
    companies: (top) => usage.ranking(top),
    upstream(resource, status, seconds) {
      const label = resourceLabel(resource);
      upstreamRequests.labels(label, status === 'error' ? 'error' : statusLabel(status)).inc();
      upstreamSeconds.labels(label).observe(seconds);
    },
    upstreamRefused: (reason) => upstreamRefusals.labels(reason).inc(),
    coalesced: (scope) => coalesced.labels(scope).inc(),
    rateLimited: (policy) => rateLimited.labels(policy).inc(),
    redisError: (component) => redisErrors.labels(component).inc(),
    l1Lookup: (hit) => l1Lookups.record(hit),
    l1ChannelGap: (gap) => channelGaps.labels(gap).inc(),
    storeLookup: (result) => storeLookups.labels(result).inc(),
    revalidation: (result) => revalidations.labels(result).inc(),
    prefetch: (result) => prefetches.labels(result).inc(),
    upstreamFillBytes: (resource, bytes) => fillBytes.labels(resourceLabel(resource)).inc(bytes),
    invalidation: (scope) => invalidations.labels(scope).inc(),
    invalidationsRefused: (reason, changes) => invalidationsRefused.labels(reason).inc(changes),
    windowlessFill: (resource) => windowless.labels(resource).inc(),
    watch(more) {
      if (gauged) throw new Error('metrics: sources are given before the first scrape');
      sources = { ...sources, ...more };
    },
    render() {
      gauge();
      return registry.render();
    },
  };
}
