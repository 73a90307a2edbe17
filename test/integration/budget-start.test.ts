/**
 * A start takes requests only once the upstream budget's shared limits are in force
 * (`whenShared`, src/limits/upstream-budget.ts, awaited by `listen` in src/app.ts): a replica on
 * its local share while the others already share the limit would add its share on top of it.
 * Against a real `redis-server`, and against a port where nothing answers.
 */
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '../../src/dev/free-port.js';
import { createUpstreamBudget } from '../../src/limits/upstream-budget.js';
import { RedisHealth } from '../../src/platform/redis.js';
import { type RedisServer, startRedis } from '../helpers/redis.js';

let redis: RedisServer;

beforeAll(async () => {
  redis = await startRedis();
});

afterAll(async () => {
  await redis.stop();
});

function budgetOver(url: string) {
  const shared = new Redis(url, { lazyConnect: true, enableOfflineQueue: false, maxRetriesPerRequest: 0 });
  return createUpstreamBudget({
    maxConcurrent: 3,
    maxPerSecond: 10,
    replicas: 3,
    holdMs: 1_000,
    redis: {
      connect: () => new Redis(url, { maxRetriesPerRequest: 0 }),
      prefix: `budget-start-${String(process.pid)}`,
      sharedHealth: new RedisHealth(shared),
    },
  });
}

describe('the upstream budget at a start', () => {
  it('says when its shared limits are in force', async () => {
    const budget = budgetOver(redis.url);
    expect(await budget.whenShared(5_000)).toBe(true);
    expect(await budget.whenShared(0)).toBe(true); // and from then on, at once
    await budget.close();
  });

  it('gives up at the bound when Redis does not answer, keeping to the local share', async () => {
    const budget = budgetOver(`redis://127.0.0.1:${String(await freePort())}`);
    expect(await budget.whenShared(300)).toBe(false);
    await budget.close();
  });

  it('has nothing to wait for without Redis', async () => {
    const budget = createUpstreamBudget({ maxConcurrent: 3, maxPerSecond: 10, replicas: 1, holdMs: 1_000 });
    expect(await budget.whenShared(5_000)).toBe(false);
    await budget.close();
  });
});
