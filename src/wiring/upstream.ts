/**
 * The upstream behind its guard (docs/limits.md#the-upstream-guard): the company's 429 pause, the
 * circuit breaker and the budget (its limits and company weights from the config in force, the
 * operator's run-time weights over them); and the pass-through, when configured.
 */
import { tokenRevocation } from '../auth/principal.js';
import type { Origin } from '../cache/read/origin.js';
import type { OperatorControl } from '../control/operator-control.js';
import { errorFields } from '../observability/logger.js';
import { createUpstreamClient } from '../upstream/client.js';
import { createUpstreamOrigin } from '../upstream/fetch-read.js';
import { guardOrigin } from '../upstream/guarded-fetch.js';
import { createPassthrough, type Passthrough } from '../upstream/passthrough.js';
import { CircuitBreaker } from '../upstream-guard/circuit-breaker.js';
import { createUpstreamBudget, type UpstreamBudget } from '../upstream-guard/upstream-budget.js';
import { createUpstreamPause, type UpstreamPause } from '../upstream-guard/upstream-pause.js';
import type { ConfigInForce } from './config-in-force.js';
import type { Foundation } from './foundation.js';
import type { SharedParts } from './shared.js';

export interface UpstreamParts {
  readonly breaker: CircuitBreaker;
  readonly budget: UpstreamBudget;
  /** What the cache fetches through: the upstream behind its guard. */
  readonly origin: Origin;
  readonly passthrough: Passthrough | undefined;
}

export function wireUpstream(
  foundation: Foundation,
  shared: SharedParts,
  control: OperatorControl,
  configInForce: ConfigInForce,
): UpstreamParts {
  const { options, config, logger, now, metrics, closers } = foundation;
  const client = createUpstreamClient({
    url: options.upstreamUrl,
    timeoutMs: config.upstream.timeout * 1000,
    maxBodyBytes: config.upstream.maxBodyBytes,
    connections: config.upstream.maxConcurrent,
  });
  closers.add('upstream client', () => client.close());
  const breaker = new CircuitBreaker({
    failures: config.upstream.breaker.failures,
    openForMs: config.upstream.breaker.openFor * 1000,
    now,
    onChange: (state) => logger.warn({ breaker: state }, 'upstream circuit breaker'),
  });
  const budget = wireBudget(foundation, shared, control, configInForce);
  const origin = guardOrigin(createUpstreamOrigin(client), {
    // An upstream 401 for a token the proxy accepted revokes it in the proxy too (docs/credentials.md).
    onUpstreamUnauthorized: ({ principal }) => {
      const { kind, value } = tokenRevocation(principal);
      void control.revoke(kind, value, principal.expiresAt).then((sharedNow) => {
        if (!sharedNow) logger.warn('an upstream-refused token is revoked on this replica only: Redis is unavailable');
      });
    },
    breaker,
    pause: pauseOf(foundation, shared),
    budget,
    maxQueueWaitMs: config.upstream.maxQueueWait * 1000,
    metrics,
    now,
  });
  const passthrough = config.upstream.passthrough
    ? createPassthrough({
        url: options.upstreamUrl,
        timeoutMs: config.upstream.timeout * 1000,
        maxSockets: config.upstream.maxConcurrent,
      })
    : undefined;
  if (passthrough !== undefined) closers.add('pass-through', () => passthrough.close());
  return { breaker, budget, origin, passthrough };
}

/** A company's pause after the upstream's 429, shared through Redis when there is one. */
function pauseOf({ config, now }: Foundation, { redis, cacheHealth }: SharedParts): UpstreamPause {
  return createUpstreamPause({
    redis:
      redis === undefined || cacheHealth === undefined
        ? undefined
        : { client: redis.client, health: cacheHealth, prefix: config.cache.keyPrefix },
    probeMs: config.upstream.timeout * 1000 + 1_000,
    now,
  });
}

/**
 * The upstream budget, its limits re-read on every reload (every replica reloads the same file:
 * docs/limits.md#the-upstream-budget), and its company weights the file's under the operator's
 * run-time ones (docs/limits.md#fair-shares), on every change of either.
 */
function wireBudget(
  { config, logger, now, metrics, closers }: Foundation,
  shared: SharedParts,
  control: OperatorControl,
  configInForce: ConfigInForce,
): UpstreamBudget {
  const { redis } = shared;
  const weights = (): Readonly<Record<string, number>> => ({
    ...configInForce.current.upstream.companyWeights,
    ...control.weights(),
  });
  const budget = createUpstreamBudget({
    maxConcurrent: config.upstream.maxConcurrent,
    maxPerSecond: config.upstream.maxPerSecond,
    replicas: config.rateLimit.replicas,
    liveReplicas: shared.liveReplicas,
    holdMs: config.upstream.timeout * 1000,
    cutOff: config.upstream.budgetCutOff,
    companyWeights: weights(),
    redis: redis === undefined ? undefined : { ...redis.budget, prefix: config.cache.keyPrefix },
    now,
    onRedisFailure: (error) => {
      metrics.redisError('budget');
      logger.debug(errorFields(error), 'upstream budget: the shared ledger did not answer');
    },
  });
  closers.add('upstream budget', () => budget.close());
  configInForce.onReload((file, before) => {
    const { maxConcurrent, maxPerSecond } = file.upstream;
    if (maxConcurrent !== before.upstream.maxConcurrent || maxPerSecond !== before.upstream.maxPerSecond)
      budget.apply({ maxConcurrent, maxPerSecond });
    budget.weigh(weights());
  });
  control.onWeightsChange(() => budget.weigh(weights()));
  return budget;
}
