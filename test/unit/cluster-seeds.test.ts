/**
 * The seed list a cluster client starts over from (src/platform/redis/cluster-seeds.ts): the configured
 * names resolved to every address they have, and every node of the last slot map; each once. And
 * the one private field of ioredis it writes, held to its shape here, so that an ioredis that
 * renamed it fails this test rather than a failover in production.
 */
import { Cluster } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { ClusterSeeds, parseSeed } from '../../src/platform/redis/cluster-seeds.js';

describe('cluster seeds', () => {
  it('reads host:port, an IPv6 address in brackets too', () => {
    expect(parseSeed('redis-0.redis:6379')).toEqual({ host: 'redis-0.redis', port: 6379 });
    expect(parseSeed('[::1]:7000')).toEqual({ host: '::1', port: 7000 });
  });

  it('starts over from the configured names, every address they resolve to, and the nodes last seen', async () => {
    const seeds = new ClusterSeeds(['redis-cluster:6379', '10.0.0.9:6379'], (host) =>
      Promise.resolve(host === 'redis-cluster' ? ['10.0.0.1', '10.0.0.2', '10.0.0.3'] : [host]),
    );
    expect(seeds.initial).toEqual([
      { host: 'redis-cluster', port: 6379 },
      { host: '10.0.0.9', port: 6379 },
    ]);
    await seeds.resolve();
    seeds.learn([
      { host: '10.0.0.2', port: 6379 },
      { host: '10.0.0.4', port: 6379 },
    ]);
    expect(seeds.current()).toEqual([
      { host: 'redis-cluster', port: 6379 },
      { host: '10.0.0.9', port: 6379 },
      { host: '10.0.0.1', port: 6379 },
      { host: '10.0.0.2', port: 6379 },
      { host: '10.0.0.3', port: 6379 },
      { host: '10.0.0.4', port: 6379 },
    ]);
  });

  it('keeps the configured names when one does not resolve now, and the last slot map when a read is empty', async () => {
    const seeds = new ClusterSeeds(['gone:6379'], () => Promise.reject(new Error('ENOTFOUND')));
    seeds.learn([{ host: '10.0.0.5', port: 7000 }]);
    await seeds.resolve();
    seeds.learn([]);
    expect(seeds.current()).toEqual([
      { host: 'gone', port: 6379 },
      { host: '10.0.0.5', port: 7000 },
    ]);
  });

  it('writes the list where ioredis reads it when it starts over', () => {
    const cluster = new Cluster([{ host: '127.0.0.1', port: 1 }], { lazyConnect: true });
    const view = cluster as unknown as { startupNodes: unknown };
    expect(Array.isArray(view.startupNodes)).toBe(true);
    const seeds = new ClusterSeeds(['127.0.0.1:1']);
    seeds.learn([{ host: '127.0.0.1', port: 2 }]);
    seeds.applyTo(cluster);
    expect(view.startupNodes).toEqual([
      { host: '127.0.0.1', port: 1 },
      { host: '127.0.0.1', port: 2 },
    ]);
    cluster.disconnect();
  });
});
