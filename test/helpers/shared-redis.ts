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
