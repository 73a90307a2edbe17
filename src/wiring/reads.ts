/**
 * The cache (docs/cache.md): its parts (the store, the L1, coalescing, purges), the policies in
 * force (the config file's, re-read on reload, under the operator's run-time overrides), the
 * read service that fetches through the upstream's origin, the ledger its fills are told to
 * (docs/cache.md#freshness-advice) and the ceiling on automatic lifetimes' early refreshes
 * (docs/cache.md#automatic-lifetimes).
 */

import type { CacheAddress } from '../cache/entry/cache-key.js';
import { FreshnessLedger } from '../cache/freshness/freshness-ledger.js';
import { AutoRefreshBudget } from '../cache/read/auto-refresh-budget.js';
import type { Origin } from '../cache/read/origin.js';
import { policyLifetimeMs, revalidateWindowMs } from '../cache/read/page-lifetime.js';
import { CachePolicies, type EffectivePolicy } from '../cache/read/policy.js';
import { createReadService, type ReadService } from '../cache/read/read-service.js';
import type { OperatorControl } from '../control/operator-control.js';
import { type CacheParts, createCacheParts } from './cache-parts.js';
import type { ConfigInForce } from './config-in-force.js';
import type { Foundation } from './foundation.js';
import type { SharedParts } from './shared.js';

export interface ReadParts {
  readonly policies: CachePolicies;
  readonly cache: CacheParts;
  readonly reads: ReadService;
  /** What this replica's fills learnt of each resource's pages: the freshness advice. */
  readonly freshness: FreshnessLedger;
}

export function wireReads(
  foundation: Foundation,
  shared: SharedParts,
  control: OperatorControl,
  configInForce: ConfigInForce,
  origin: Origin,
): ReadParts {
  const { options, config, logger, now, metrics, closers } = foundation;
  const policies = new CachePolicies(config.cache, control.overrides());
  control.onOverridesChange((overrides) => policies.setOverrides(overrides));
  configInForce.onReload((file) => policies.setConfig(file.cache));
  const cache = createCacheParts(config, shared.redis, shared.cacheHealth, now, logger, metrics);
  closers.add('cache store', () => cache.store.close());
  closers.add('fill coordinator', () => cache.coordinator.close());
  closers.add('change channel', () => cache.channel?.close());
  const freshness = new FreshnessLedger({
    now,
    metrics,
    refreshAhead: config.cache.refresh.ahead,
    staleWindowOf: (resource) => staleWindowOf(policies.policyFor(resource)),
    readsOf: metrics === undefined ? undefined : (resource) => metrics.readsOf(resource),
  });
  const autoBudget = new AutoRefreshBudget({
    perReplica: config.cache.autoTtl.maxRefreshesPerSecond,
    perFleet: config.cache.autoTtl.fleetMaxRefreshesPerSecond,
    replicas: () => shared.replicaCount?.current() ?? config.rateLimit.replicas,
  });
  const reads = createReadService({
    store: cache.store,
    l1: cache.l1,
    coordinator: cache.coordinator,
    policies,
    keyPrefix: config.cache.keyPrefix,
    fetch: origin,
    // A follower waits about as long as the leader's upstream exchange may take.
    coalesceWaitMs: config.upstream.timeout * 1000 + 1_000,
    metrics,
    purges: cache.purges,
    refreshAhead: config.cache.refresh.ahead,
    maxBackgroundRefreshes: config.cache.refresh.maxConcurrent,
    invalidatedStaleForMs: config.cache.invalidation.staleFor * 1000,
    prefetch: config.cache.prefetch,
    now,
    onFill: (observation) => freshness.observe(observation),
    onWindowless: windowlessPages(logger, metrics),
    autoBudget,
    ...(options.onBackgroundRefresh !== undefined && { onBackgroundRefresh: options.onBackgroundRefresh }),
  });
  return { policies, cache, reads, freshness };
}

/**
 * How long past the TTL in force a page is served while one refresh runs, seconds, as the read
 * service serves it (`revalidateWindowMs`, page-lifetime.ts) a page that lives the policy's `ttl`.
 * What the freshness advice's stale share counts (docs/cache.md#freshness-advice).
 */
function staleWindowOf(policy: EffectivePolicy): number {
  return revalidateWindowMs(policy, policyLifetimeMs(200, policy)) / 1000;
}

/**
 * Counts each list page filled that broke the keyset rule, and logs the first of each resource:
 * every change of its group reaches its lists from then (docs/cache.md#window-marks), and the
 * upstream may have changed how it pages.
 */
function windowlessPages(
  logger: Foundation['logger'],
  metrics: Foundation['metrics'],
): (address: CacheAddress) => void {
  const logged = new Set<string>();
  return ({ group }) => {
    metrics.windowlessFill(group.resource);
    if (logged.has(group.resource)) return;
    logged.add(group.resource);
    logger.warn(
      { resource: group.resource },
      'a list page broke the keyset rule (ids ascending above the cursor, next_after_id its last): every change of the resource reaches its lists',
    );
  };
}
