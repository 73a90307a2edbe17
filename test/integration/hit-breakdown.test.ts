/**
 * The hit benchmark's breakdown (bench/hit-breakdown.ts) on a real redis-server, with a small time
 * budget: it times the request flow's own steps by name, a step added to the flow included with
 * no change to the bench, and it says which steps a hit never reaches.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EXCHANGE_ROW, type Flow, formatBreakdown, runHitBreakdown } from '../../bench/hit-breakdown.js';
import { REQUEST_FLOW, type Step } from '../../src/planes/data/steps.js';
import { type RedisServer, startRedis } from '../helpers/redis.js';

let redis: RedisServer;

beforeAll(async () => {
  redis = await startRedis();
});

afterAll(async () => {
  await redis.stop();
});

describe('the hit breakdown', () => {
  it('times each step of a hit on the real parts, one added to the flow too, and leaves no key behind', async () => {
    let added = 0;
    const addedStep: Step = () => {
      added += 1;
      return false;
    };
    const neverOnAHit: Step = () => {
      throw new Error('a hit is answered before this step');
    };
    const limitsAt = REQUEST_FLOW.findIndex(([name]) => name === 'inbound limits');
    const flow: Flow = [
      ...REQUEST_FLOW.slice(0, limitsAt),
      ['an added step', addedStep],
      ...REQUEST_FLOW.slice(limitsAt),
      ['after the answer', neverOnAHit],
    ];

    const report = await runHitBreakdown({ redisUrl: redis.url, msPerStep: 3, flow, hitsPerSecond: 20_000 });

    const onAHit = flow.slice(0, -1).map(([name]) => name);
    expect(report.steps.map((step) => step.name)).toEqual([EXCHANGE_ROW, ...onAHit]);
    expect(added).toBeGreaterThan(0);
    for (const step of report.steps) expect(step.us).toBeGreaterThanOrEqual(0);
    expect(report.stepSumUs).toBeCloseTo(
      report.steps.reduce((sum, step) => sum + step.us, 0),
      6,
    );
    expect(report.dataPlaneUs).toBeGreaterThan(0);
    expect(report.storeMissAmortisedUs).toBeGreaterThan(0);
    expect(report.notes).toEqual(['steps a hit never reaches (answered before them): after the answer']);
    const printed = formatBreakdown(report);
    for (const name of onAHit) expect(printed).toContain(`    ${name}`);
    for (const context of ['L1 miss', 'jose HS256 verify', 'decodeEntry', 'brotliBody', 'encodeEntry'])
      expect(printed).toContain(context);

    const { Redis } = await import('ioredis');
    const client = new Redis(redis.url);
    try {
      expect(await client.keys('benchhb:*')).toEqual([]);
    } finally {
      client.disconnect();
    }
  }, 60_000);
});
