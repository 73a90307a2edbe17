/**
 * The upstream budget through a failover (issue 8): `kill -9` of the Redis Cluster master that holds
 * the budget's slot while fills are in flight. Their slots' releases never reach the new master;
 * they must come back by themselves (each slot expires `upstream.timeout` + 2 s after it was taken),
 * so that the upstream gets ≥ 90% of its budget again within `upstream.timeout` + 10 s, never more
 * than the caps meanwhile.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { API_PREFIX, RESOURCE_NAMES } from '../../src/catalog/resources.js';
import { mintDevToken } from '../../src/dev/dev-credentials.js';
import type { RedisCluster } from '../../src/dev/redis-cluster.js';
import type { Sandbox } from '../../src/sandbox/server.js';
import { startSandbox } from '../helpers/env.js';
import { recordFigure } from '../helpers/figures.js';
import { closedLoop } from '../helpers/load.js';
import { type Replica, startReplicas, unmetLimits } from '../helpers/replicas.js';
import { type SharedRedis, startSharedRedis } from '../helpers/shared-redis.js';

const secret = 'upstream budget failover: thirty-two bytes at least';
const TIMEOUT_SECONDS = 3;
const MAX_PER_SECOND = 20;
const BEFORE_SECONDS = 4;
/** The target: capacity back within the upstream timeout + 10 s of the kill. */
const RECOVERY_SECONDS = TIMEOUT_SECONDS + 10;
const AFTER_SECONDS = 3;

let redis: SharedRedis;
let cluster: RedisCluster;
let sandbox: Sandbox;
let replicas: Replica[] = [];

let nextCold = 0;
function coldTarget(): string {
  const i = nextCold++;
  const resource = RESOURCE_NAMES[i % RESOURCE_NAMES.length] ?? 'receipts';
  return `${API_PREFIX}/${resource}?after_id=${String(2_000_000 + i)}`;
}

function startsIn(startsBySecond: Readonly<Record<string, number>>, fromSecond: number, toSecond: number): number[] {
  const out: number[] = [];
  for (let second = fromSecond; second < toSecond; second++) out.push(startsBySecond[String(second)] ?? 0);
  return out;
}

const mean = (values: readonly number[]): number => values.reduce((sum, v) => sum + v, 0) / Math.max(1, values.length);

beforeAll(async () => {
  redis = await startSharedRedis('cluster');
  if (redis.cluster === undefined) throw new Error('a cluster was asked for');
  cluster = redis.cluster;
  sandbox = await startSandbox({ keys: { kind: 'secret', secret } });
  replicas = await startReplicas(
    3,
    { UPSTREAM_URL: sandbox.url, JWT_SECRET: secret, ...redis.env },
    [
      `upstream: { maxConcurrent: 5, maxPerSecond: ${String(MAX_PER_SECOND)}, maxQueueWait: 2, timeout: ${String(TIMEOUT_SECONDS)} }`,
      unmetLimits(3),
    ].join('\n'),
  );
});

afterAll(async () => {
  await Promise.all(replicas.map((r) => r.process.stop('SIGKILL')));
  await sandbox?.close();
  await redis?.stop();
});

describe('the upstream budget when its Redis Cluster master is killed mid-load', () => {
  it('gets its capacity back within upstream.timeout + 10 s, never over the caps', { timeout: 60_000 }, async () => {
    const token = await mintDevToken({ company: 1, secret });
    const budgetMaster = await cluster.masterOf('{slab:budget}');
    sandbox.faults.set({ latencyMs: 200 });
    sandbox.resetStats();
    const startedAt = Date.now();
    const load = closedLoop({
      connections: 60,
      durationMs: (BEFORE_SECONDS + RECOVERY_SECONDS + AFTER_SECONDS) * 1000,
      next: (i) => ({ base: replicas[i % replicas.length]?.url ?? '', path: coldTarget(), token }),
    });
    await new Promise((resolve) => setTimeout(resolve, BEFORE_SECONDS * 1000));
    const killedAt = Date.now();
    await cluster.kill(budgetMaster);
    const result = await load;
    sandbox.faults.clear();
    const stats = sandbox.stats();

    const first = Math.ceil(startedAt / 1000);
    const killSecond = Math.floor(killedAt / 1000);
    const before = mean(startsIn(stats.startsBySecond, first, killSecond));
    const recoveredFrom = killSecond + RECOVERY_SECONDS;
    const after = startsIn(stats.startsBySecond, recoveredFrom, recoveredFrom + AFTER_SECONDS - 1);
    recordFigure('budget-failover', 'starts per second', {
      before,
      series: startsIn(stats.startsBySecond, first, recoveredFrom + AFTER_SECONDS),
      killAtSecond: killSecond - first,
      afterRecoveryBound: mean(after),
      maxInFlight: stats.maxInFlight,
      maxPerSlidingSecond: stats.maxPerSlidingSecond,
      byStatus: result.byStatus,
    });
    expect(result.errors).toBe(0);
    expect(Object.keys(result.byStatus).sort()).toEqual(['200', '503']);
    expect(stats.maxInFlight).toBeLessThanOrEqual(5);
    expect(stats.maxPerSlidingSecond).toBeLessThanOrEqual(MAX_PER_SECOND);
    expect(before).toBeGreaterThanOrEqual(MAX_PER_SECOND * 0.8);
    expect(mean(after)).toBeGreaterThanOrEqual(before * 0.9);
  });
});
