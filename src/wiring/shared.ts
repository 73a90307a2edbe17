/**
 * Redis, when replicas share one (docs/scaling-out.md), and what is counted through it: the
 * cache's per-node breaker, how long Redis has been away, the replicas alive; each node's eviction
 * policy checked as its connection becomes ready. All absent for a single replica without Redis.
 */
import { errorFields } from '../observability/logger.js';
import { connectRedis, isSharedRedis, type SharedRedis } from '../platform/redis/connection.js';
import { watchRedisDowntime } from '../platform/redis/downtime.js';
import { type EvictionSetting, watchEvictionPolicy } from '../platform/redis/eviction-policy.js';
import { RedisHealth } from '../platform/redis/health.js';
import { countReplicas, type ReplicaCount } from '../platform/redis/replica-count.js';
import type { Foundation } from './foundation.js';

export interface SharedParts {
  readonly redis: SharedRedis | undefined;
  /** The cache's breaker; the inbound limits have their own, so a slow limit decision never makes the cache skip Redis as well. */
  readonly cacheHealth: RedisHealth | undefined;
  readonly redisDownSeconds: (() => number) | undefined;
  readonly replicaCount: ReplicaCount | undefined;
  /** The replicas sharing Redis, counted through it: each one's local share while Redis is unusable. */
  readonly liveReplicas: (() => number | undefined) | undefined;
}

const NOT_SHARED: SharedParts = {
  redis: undefined,
  cacheHealth: undefined,
  redisDownSeconds: undefined,
  replicaCount: undefined,
  liveReplicas: undefined,
};

export function wireShared({ options, config, logger, now, metrics, closers }: Foundation): SharedParts {
  if (!isSharedRedis(options.redis)) return NOT_SHARED;
  const redis = connectRedis(options.redis, {
    commandTimeoutMs: config.redis.commandTimeoutMs,
    onError: (component, error) => {
      metrics.redisError(component);
      logger.debug({ ...errorFields(error), component }, 'redis connection error');
    },
  });
  closers.add('redis', () => redis.close());
  // The operator state lives in the cache's Redis unless it has one of its own.
  const controlApart = options.redis.controlUrl !== undefined;
  const reportEviction = (setting: EvictionSetting, problem: string | undefined): void => {
    const fields = { redisNode: setting.node, maxmemoryPolicy: setting.policy, maxmemory: setting.maxmemory };
    if (problem === undefined) logger.info(fields, 'redis eviction policy');
    else logger.warn(fields, problem);
  };
  watchEvictionPolicy(redis.client, { pages: true, operatorState: !controlApart }, reportEviction);
  if (controlApart) watchEvictionPolicy(redis.control.client, { pages: false, operatorState: true }, reportEviction);
  const replicaCount = countReplicas({
    client: redis.client,
    prefix: config.cache.keyPrefix,
    now,
    onError: (error) => logger.debug(errorFields(error), 'replicas not counted'),
  });
  closers.add('replica count', () => replicaCount.close());
  return {
    redis,
    cacheHealth: new RedisHealth(redis.client, { now, onFailure: () => metrics.redisError('cache') }),
    redisDownSeconds: watchRedisDowntime(redis.client, now),
    replicaCount,
    liveReplicas: () => replicaCount.current(),
  };
}
