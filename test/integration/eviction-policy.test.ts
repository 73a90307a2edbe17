/**
 * The check of what Redis evicts when full (src/platform/redis/eviction-policy.ts, docs/cache.md): a Redis
 * holding the operator state under an `allkeys-*` policy, or a cache Redis under `noeviction` with
 * a `maxmemory`, is named in a warning when the proxy connects; `volatile-lru` passes. Real
 * `redis-server`, real proxy.
 */
import { Writable } from 'node:stream';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/observability/logger.js';
import { evictionProblem, readEvictionSettings } from '../../src/platform/redis/eviction-policy.js';
import type { Sandbox } from '../../src/sandbox/server.js';
import { startProxy, startSandbox } from '../helpers/env.js';
import { type RedisServer, startRedis } from '../helpers/redis.js';

let redis: RedisServer;
let sandbox: Sandbox;
let admin: Redis;

beforeAll(async () => {
  redis = await startRedis();
  sandbox = await startSandbox();
  admin = new Redis(redis.url);
});

afterAll(async () => {
  admin.disconnect();
  await sandbox.close();
  await redis.stop();
});

describe('evictionProblem', () => {
  const both = { pages: true, operatorState: true };
  it.each([
    ['volatile-lru', 0, both, undefined],
    ['volatile-ttl', 1 << 30, both, undefined],
    ['allkeys-lru', 1 << 30, both, 'operator state'],
    ['allkeys-lfu', 0, { pages: false, operatorState: true }, 'operator state'],
    ['allkeys-lru', 1 << 30, { pages: true, operatorState: false }, undefined],
    ['noeviction', 1 << 30, both, 'refuses every write'],
    ['noeviction', 0, both, undefined],
    ['noeviction', 1 << 30, { pages: false, operatorState: true }, undefined],
  ] as const)('%s with maxmemory %i: %s', (policy, maxmemory, holds, problem) => {
    const found = evictionProblem({ node: 'n', policy, maxmemory }, holds);
    if (problem === undefined) expect(found).toBeUndefined();
    else expect(found).toContain(problem);
  });
});

/** What a proxy on this Redis logs of its eviction policy when it connects: one line per node. */
async function eviction(): Promise<Record<string, unknown>> {
  let reported: (line: Record<string, unknown>) => void = () => undefined;
  const line = new Promise<Record<string, unknown>>((resolve) => {
    reported = resolve;
  });
  const logger = createLogger(
    'info',
    new Writable({
      write(chunk: Buffer, _encoding, callback) {
        for (const text of chunk.toString('utf8').split('\n')) {
          const parsed = text === '' ? undefined : (JSON.parse(text) as Record<string, unknown>);
          if (typeof parsed?.maxmemoryPolicy === 'string') reported(parsed);
        }
        callback();
      },
    }),
  );
  const proxy = await startProxy({ upstreamUrl: sandbox.url, redisUrl: redis.url, logger });
  try {
    return await line;
  } finally {
    await proxy.close();
  }
}

describe('on connecting, the proxy', () => {
  it('reads each node’s policy and limit', async () => {
    await admin.config('SET', 'maxmemory-policy', 'volatile-lru');
    await admin.config('SET', 'maxmemory', '0');
    const settings = await readEvictionSettings(admin);
    expect(settings.map(({ policy, maxmemory }) => ({ policy, maxmemory }))).toEqual([
      { policy: 'volatile-lru', maxmemory: 0 },
    ]);
    expect(settings[0]?.node).toBe(`127.0.0.1:${new URL(redis.url).port}`);
  });

  it('warns of a policy that may evict the operator state, naming it', async () => {
    await admin.config('SET', 'maxmemory-policy', 'allkeys-lru');
    const line = await eviction();
    expect(line).toMatchObject({ level: 40, maxmemoryPolicy: 'allkeys-lru' });
    expect(String(line.msg)).toContain('operator state');
  });

  it('warns of noeviction under a maxmemory, and only notes volatile-lru', async () => {
    await admin.config('SET', 'maxmemory-policy', 'noeviction');
    await admin.config('SET', 'maxmemory', String(512 * 1024 * 1024));
    expect(await eviction()).toMatchObject({ level: 40, maxmemoryPolicy: 'noeviction' });
    await admin.config('SET', 'maxmemory-policy', 'volatile-lru');
    expect(await eviction()).toMatchObject({
      level: 30,
      maxmemoryPolicy: 'volatile-lru',
      msg: 'redis eviction policy',
    });
    await admin.config('SET', 'maxmemory', '0');
  });
});
