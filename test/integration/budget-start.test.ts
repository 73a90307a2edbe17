/**
 * A start takes requests once the upstream budget's shared ledger answers (`whenShared`,
 * src/upstream-guard/upstream-budget.ts, awaited by `listen` in src/app.ts), so that its first misses do
 * not wait for it. Against a real `redis-server`, and against a port where nothing answers.
 */
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createUpstreamBudget, REJOIN_MS } from '../../src/upstream-guard/upstream-budget.js';
import { type RedisServer, startRedis } from '../helpers/redis.js';
import { freePort } from '../support/free-port.js';

let redis: RedisServer;

beforeAll(async () => {
  redis = await startRedis();
});

afterAll(async () => {
  await redis.stop();
});

function budgetOver(url: string, cutOff: 'wait' | 'share') {
  const client = new Redis(url, { enableOfflineQueue: false, maxRetriesPerRequest: 0, commandTimeout: 250 });
  client.on('error', () => undefined);
  const budget = createUpstreamBudget({
    maxConcurrent: 3,
    maxPerSecond: 10,
    replicas: 3,
    holdMs: 1_000,
    cutOff,
    redis: { client, prefix: `budget-start-${String(process.pid)}`, commandTimeoutMs: 250 },
  });
  return {
    budget,
    close() {
      budget.close();
      client.disconnect();
    },
  };
}

describe('the upstream budget at a start', () => {
  it('says when its shared ledger grants: after the first epoch has opened', async () => {
    const { budget, close } = budgetOver(redis.url, 'share');
    expect(await budget.whenShared(REJOIN_MS + 5_000)).toBe(true);
    expect(budget.mode()).toBe('shared');
    expect(await budget.whenShared(0)).toBe(true); // and from then on, at once
    close();
  });

  it('gives up at the bound when Redis does not answer; with `wait`, takes no slot meanwhile', async () => {
    const { budget, close } = budgetOver(`redis://127.0.0.1:${String(await freePort())}`, 'wait');
    expect(await budget.whenShared(300)).toBe(false);
    expect(budget.mode()).toBe('cut-off');
    expect(await budget.run(() => Promise.resolve('ran'), 50)).toEqual({ kind: 'refused' });
    close();
  });

  it('with `share` (the default), takes its share at once when Redis does not answer', async () => {
    const { budget, close } = budgetOver(`redis://127.0.0.1:${String(await freePort())}`, 'share');
    expect(await budget.whenShared(300)).toBe(false);
    expect(budget.mode()).toBe('local');
    // Its share of 3 among 3 replicas: one slot.
    expect(await budget.run(() => Promise.resolve('ran'), 50)).toEqual({ kind: 'ran', value: 'ran' });
    close();
  });

  it('has nothing to wait for without Redis', async () => {
    const budget = createUpstreamBudget({ maxConcurrent: 3, maxPerSecond: 10, replicas: 1, holdMs: 1_000 });
    expect(await budget.whenShared(5_000)).toBe(false);
    expect(budget.mode()).toBe('local');
    budget.close();
  });
});
