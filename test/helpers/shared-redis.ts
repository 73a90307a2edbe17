/**
 * The shared Redis of a multi-replica suite, either one `redis-server` or a real Redis Cluster of
 * 3 masters and 3 replicas: the suites that are about sharing run against both.
 */
import { Cluster, Redis } from 'ioredis';
import { type RedisCluster, startRedisCluster } from '../support/redis-cluster.js';
import { type RedisServer, startRedis } from './redis.js';

export type RedisTopology = 'single' | 'cluster';
export const REDIS_TOPOLOGIES: readonly RedisTopology[] = ['single', 'cluster'];

export interface SharedRedis {
  readonly topology: RedisTopology;
  /** What a replica is given: `REDIS_URL`, or `REDIS_CLUSTER_NODES`. */
  readonly env: { readonly REDIS_URL: string } | { readonly REDIS_CLUSTER_NODES: string };
  /** The single server (`single` only). */
  readonly server: RedisServer | undefined;
  /** The cluster (`cluster` only). */
  readonly cluster: RedisCluster | undefined;
  /**
   * A plain client for the test itself (ioredis `Cluster` for a cluster); its connection errors
   * (a node the test killed) fail its commands, never the test process.
   */
  client(): Redis | Cluster;
  /** FLUSHALL everywhere. */
  flushAll(): Promise<void>;
  stop(): Promise<void>;
}

function quiet<T extends Redis | Cluster>(client: T): T {
  client.on('error', () => undefined);
  return client;
}

export async function startSharedRedis(topology: RedisTopology): Promise<SharedRedis> {
  if (topology === 'single') {
    const server = await startRedis();
    return {
      topology,
      env: { REDIS_URL: server.url },
      server,
      cluster: undefined,
      client: () => quiet(new Redis(server.url)),
      async flushAll() {
        const client = new Redis(server.url);
        await client.flushall();
        client.disconnect();
      },
      stop: () => server.stop(),
    };
  }
  const cluster = await startRedisCluster();
  return {
    topology,
    env: { REDIS_CLUSTER_NODES: cluster.seeds },
    server: undefined,
    cluster,
    client: () => quiet(new Cluster(cluster.nodes.map((node) => ({ host: '127.0.0.1', port: node.port })))),
    flushAll: () => cluster.flushAll(),
    stop: () => cluster.stop(),
  };
}

/**
 * An operator state (empty) written long before, as in a Redis that has served replicas for a
 * while: the replicas started next confirm it at their first read, instead of waiting for a state
 * they wrote anew to settle (~3 s: src/control/operator-control.ts, and
 * test/integration/operator-confirmation.test.ts). For the suites about something else than the
 * operator state's beginnings; what a flush or an empty restart later does to it is unchanged.
 * Their replicas are then seconds younger when the tests begin: until a replica's count of the
 * others is settled its local shares are made of `rateLimit.replicas` (docs/limits.md#the-replica-count),
 * so a suite whose local shares matter sets it, or waits for the replicas to count each other
 * (`replicasCounted`).
 */
export async function settledOperatorState(
  redis: SharedRedis | RedisServer | RedisCluster,
  prefix = 'slab',
): Promise<void> {
  const client =
    'client' in redis
      ? redis.client()
      : 'nodes' in redis
        ? quiet(new Cluster(redis.nodes.map((node) => ({ host: '127.0.0.1', port: node.port }))))
        : new Redis(redis.url);
  try {
    await client.hset(`{${prefix}:ctl}:meta`, 'incarnation', 'settled-before-the-suite', 'born', '1', 'rev', '0');
  } finally {
    client.disconnect();
  }
}
