/**
 * What the metrics read of the parts at each scrape (docs/operations.md#metrics), bound once the
 * parts exist.
 */
import { DEFAULT_TARGET_SECONDS } from '../cache/freshness/freshness-advice.js';
import { BUDGET_MODES } from '../upstream-guard/budget-mode.js';
import type { ReplicaParts } from './replica-parts.js';

export function observeParts({ foundation, lifecycle, shared, control, upstream, reads }: ReplicaParts): void {
  const redisShared = shared.redis !== undefined;
  foundation.metrics.watch({
    circuitState: () => upstream.breaker.state,
    redisUp: redisShared ? () => shared.cacheHealth?.state() !== 'down' : undefined,
    inFlightRequests: () => lifecycle.inFlight,
    cacheFootprint: () => reads.cache.footprint(),
    redisDownSeconds: redisShared ? () => shared.redisDownSeconds?.() ?? 0 : undefined,
    operatorStateAgeSeconds: redisShared ? () => (control.status().ageMs ?? 0) / 1000 : undefined,
    budgetMode: { modes: BUDGET_MODES, current: () => upstream.budget.mode() },
    companyCacheBytes: () => reads.cache.bytesByCompany(),
    l1ChannelTold: reads.cache.channel === undefined ? undefined : () => reads.cache.channel?.told === true,
    freshness: () =>
      reads.freshness.advice(
        DEFAULT_TARGET_SECONDS,
        (resource) => reads.policies.policyFor(resource).ttl,
        foundation.now(),
      ).resources,
  });
}
