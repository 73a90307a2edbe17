/**
 * Freshness advice (`/admin/cache/freshness`, docs/cache.md#freshness-advice): for each resource
 * this replica has filled in the last ten minutes, how often its pages change, what its TTL costs
 * the upstream and its readers, and the TTL that meets a target staleness (`?target=` seconds).
 */
import type { IRouter, Request, Response } from 'express';
import {
  DEFAULT_TARGET_SECONDS,
  MAX_TARGET_SECONDS,
  type ResourceFreshness,
} from '../../cache/freshness/freshness-advice.js';
import type { FreshnessLedger } from '../../cache/freshness/freshness-ledger.js';
import type { CachePolicies } from '../../cache/read/policy.js';
import { InvalidParameterError } from '../../errors/proxy-error.js';
import { noStore, problem } from './operator-io.js';

export interface FreshnessFigures {
  readonly freshness: Pick<FreshnessLedger, 'advice'>;
  readonly policies: Pick<CachePolicies, 'policyFor'>;
  readonly now?: (() => number) | undefined;
}

export function freshnessRoutes(router: IRouter, { freshness, policies, now = Date.now }: FreshnessFigures): void {
  router.get('/admin/cache/freshness', function freshnessAdvice(req: Request, res: Response) {
    const target = targetOf(req.query.target);
    if (target instanceof InvalidParameterError) return problem(req, res, target);
    const advice = freshness.advice(target, (resource) => policies.policyFor(resource).ttl, now());
    noStore(res).json({
      resources: advice.resources.map(asJson),
      window_seconds: advice.windowSeconds,
      target_seconds: advice.targetSeconds,
    });
  });
}

/** The target staleness: a positive decimal number of seconds, at most a day; 5 when not given. */
function targetOf(value: unknown): number | InvalidParameterError {
  if (value === undefined) return DEFAULT_TARGET_SECONDS;
  const text = typeof value === 'string' ? value : '';
  const target = Number(text);
  return /^[0-9]{1,5}(?:\.[0-9]{1,3})?$/.test(text) && target > 0 && target <= MAX_TARGET_SECONDS
    ? target
    : new InvalidParameterError(
        'target',
        `Seconds of staleness: a number above 0, at most ${String(MAX_TARGET_SECONDS)}.`,
      );
}

/** A resource's advice as the operator API spells it. */
function asJson(advice: ResourceFreshness) {
  return {
    resource: advice.resource,
    ttl_seconds: advice.ttlSeconds,
    refreshes_per_minute: advice.refreshesPerMinute,
    fills_per_minute: advice.fillsPerMinute,
    unchanged_share: advice.unchangedShare,
    upstream_bytes_per_minute: advice.upstreamBytesPerMinute,
    change_interval_seconds: advice.changeIntervalSeconds,
    refresh_wait_seconds: advice.refreshWaitSeconds,
    stale_share_estimate: advice.staleShareEstimate,
    suggested_ttl_seconds: advice.suggestedTtlSeconds,
    last_modified_interval_seconds: advice.lastModifiedIntervalSeconds,
    note: advice.note,
  };
}
