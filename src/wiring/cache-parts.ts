/**
 * The cache's parts, in process for one replica or shared through Redis: the store, the L1 in front
 * of a remote store and the change channel it listens to, the fill coordinator and the purge bus
 * (docs/cache.md).
 */
import type { Logger } from 'pino';
import { changeEpochKey, changeSequenceKey } from '../cache/entry/cache-key.js';
import { ChangeChannel } from '../cache/read/change-channel.js';
import { createRedisCoordinator, type FillCoordinator, LOCAL_COORDINATOR } from '../cache/read/coordinator.js';
import { createLocalPurgeBus, createRedisPurgeBus, type PurgeBus } from '../cache/read/purge-bus.js';
import { L1Cache } from '../cache/stores/l1.js';
import { createMemoryStore } from '../cache/stores/memory-store.js';
import { createRedisStore } from '../cache/stores/redis-store.js';
import type { CacheStore } from '../cache/stores/store.js';
import type { FileConfig } from '../config/schema.js';
import { errorFields } from '../observability/logger.js';
import type { CacheFootprint, Metrics } from '../observability/metrics.js';
import type { SharedRedis } from '../platform/redis/connection.js';
import type { RedisHealth } from '../platform/redis/health.js';

/** The cache's parts: in process for one replica, or shared through Redis. */
export interface CacheParts {
  readonly store: CacheStore;
  readonly l1: L1Cache | undefined;
  readonly coordinator: FillCoordinator;
  readonly purges: PurgeBus;
  /** Whether this replica heard every change announced (in front of a shared store only). */
  readonly channel: ChangeChannel | undefined;
  /** What the in-process tiers hold (the L1 in front of Redis, or the single replica's store). */
  readonly footprint: () => readonly CacheFootprint[];
  /** Bytes each company holds in the in-process tier (the L1, or the single replica's store). */
  readonly bytesByCompany: () => ReadonlyMap<string, number>;
}

const NONE: ReadonlyMap<string, number> = new Map();

export function createCacheParts(
  config: FileConfig,
  redis: SharedRedis | undefined,
  health: RedisHealth | undefined,
  now: () => number,
  logger: Logger,
  metrics?: Pick<Metrics, 'l1ChannelGap'>,
): CacheParts {
  if (redis === undefined || health === undefined) {
    const store = createMemoryStore({ maxBytes: config.cache.memory.maxBytes, now });
    return {
      store,
      l1: undefined,
      coordinator: LOCAL_COORDINATOR,
      purges: createLocalPurgeBus(),
      channel: undefined,
      footprint: () => (store.footprint === undefined ? [] : [{ tier: 'memory', ...store.footprint() }]),
      bytesByCompany: () => store.bytesByCompany?.() ?? NONE,
    };
  }
  const { client, subscriber } = redis;
  const prefix = config.cache.keyPrefix;
  const l1 = new L1Cache({ maxBytes: config.cache.l1.maxBytes, ttlMs: config.cache.l1.ttl * 1000 });
  let channel: ChangeChannel | undefined;
  const purges = createRedisPurgeBus({
    client,
    subscriber,
    channel: `${prefix}:purge`,
    sequenceKey: changeSequenceKey(prefix),
    epochKey: changeEpochKey(prefix),
    health,
    onNumber: (number) => channel?.heard(number),
    onError: (error) => logger.debug(errorFields(error), 'purge announcement failed'),
  });
  // A lost announcement is noticed within two heartbeats: half an L1 lifetime (change-channel.ts).
  channel = new ChangeChannel({
    read: () => purges.readSequence(),
    listener: l1,
    intervalMs: (config.cache.l1.ttl * 1000) / 4,
    onGap: (gap) => {
      metrics?.l1ChannelGap(gap);
      logger.info({ gap }, 'change channel gap: L1 copies are confirmed before they serve again');
    },
  });
  return {
    store: createRedisStore({
      client,
      health,
      prefix,
      now,
      onFailure: (operation) => logger.debug({ operation }, 'redis store operation failed'),
    }),
    l1,
    coordinator: createRedisCoordinator({
      client,
      subscriber,
      health,
      channel: `${prefix}:fills`,
      // A leader's lease outlives its longest upstream exchange; only a dead leader's expires.
      leaseMs: config.upstream.timeout * 1000 + 2_000,
    }),
    purges,
    channel,
    footprint: () => [{ tier: 'l1', ...l1.footprint() }],
    bytesByCompany: () => l1.bytesByCompany(),
  };
}
