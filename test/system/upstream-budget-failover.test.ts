/**
 * The upstream budget through a failover of the Redis Cluster master that holds its ledger: three
 * replicas, `maxConcurrent` 5 and `maxPerSecond` 20 for all of them, 30 clients
 * on cold keys, an upstream that takes 200 ms, and `kill -9` of that master mid-load.
 *
 * What the design promises (docs/limits.md#the-upstream-budget), counted at the upstream (the
 * sandbox, in its own process), with `upstream.budgetCutOff: wait`: never more than 5 in flight and
 * never more than 20 starts in any second, before, through and after the failover; the replicas
 * start nothing while they are cut off, the promoted master's ledger begins a new epoch in which
 * they register what they hold, and they share it again: every replica back on the shared ledger,
 * the upstream serving again. (A failover that cuts the replicas off is Redis down for everyone
 * while it lasts: with the default, `share`, each takes its share at once, beside slots the others
 * still hold, and the table's bound for that case is the one that holds.)
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mintDevToken } from '../../src/cli/dev-credentials.js';
import { coldTargets } from '../helpers/cold-targets.js';
import { recordFigure } from '../helpers/figures.js';
import { closedLoop } from '../helpers/load.js';
import { budgetMode, type Replica, startReplicas, unmetLimits, until } from '../helpers/replicas.js';
import { phaseOf, type SandboxProcess, startSandboxProcess } from '../helpers/sandbox-process.js';
import { type SharedRedis, startSharedRedis } from '../helpers/shared-redis.js';
import type { RedisCluster } from '../support/redis-cluster.js';

const secret = 'upstream budget failover: thirty-two bytes at least';
const MAX_CONCURRENT = 5;
const MAX_PER_SECOND = 20;
const CLIENTS = 30;
const TIMEOUT_SECONDS = 3;
const BEFORE_MS = 3_000;
const AFTER_MS = 3_000;

let redis: SharedRedis;
let cluster: RedisCluster;
let sandbox: SandboxProcess;
let replicas: Replica[] = [];

const coldTarget = coldTargets(2_000_000);

beforeAll(async () => {
  redis = await startSharedRedis('cluster');
  if (redis.cluster === undefined) throw new Error('a cluster was asked for');
  cluster = redis.cluster;
  sandbox = await startSandboxProcess(secret);
  replicas = await startReplicas(
    3,
    { UPSTREAM_URL: sandbox.url, JWT_SECRET: secret, ...redis.env },
    [
      `upstream: { maxConcurrent: ${String(MAX_CONCURRENT)}, maxPerSecond: ${String(MAX_PER_SECOND)}, maxQueueWait: 2, timeout: ${String(TIMEOUT_SECONDS)}, budgetCutOff: wait }`,
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
  it('never goes over the caps at the upstream, and every replica shares the ledger again', {
    timeout: 90_000,
  }, async () => {
    const token = await mintDevToken({ company: 1, secret });
    const budgetMaster = await cluster.masterOf('{slab:budget}');
    await sandbox.reset();
    await sandbox.setFaults({ latencyMs: 200 });
    let stop = false;
    const load = closedLoop({
      connections: CLIENTS,
      durationMs: 60_000,
      next: (i) => ({ base: replicas[i % replicas.length]?.url ?? '', path: coldTarget(), token }),
      stopWhen: () => stop,
    });
    await new Promise((resolve) => setTimeout(resolve, BEFORE_MS));
    const killedAt = Date.now();
    await cluster.kill(budgetMaster);
    await until(
      async () => (await Promise.all(replicas.map(budgetMode))).every((mode) => mode === 'shared'),
      'every replica back on the shared ledger',
      30_000,
    );
    const sharedAgainAt = Date.now();
    await new Promise((resolve) => setTimeout(resolve, AFTER_MS));
    stop = true;
    const result = await load;
    const stats = await sandbox.stats();
    const whole = phaseOf(stats, 0, Number.POSITIVE_INFINITY);
    const after = phaseOf(stats, sharedAgainAt, Number.POSITIVE_INFINITY);
    recordFigure('budget-failover', 'at the upstream', {
      whole,
      after,
      sharedAgainMs: sharedAgainAt - killedAt,
      byStatus: result.byStatus,
    });
    expect(result.errors).toBe(0);
    expect(Object.keys(result.byStatus).every((status) => status === '200' || status === '503')).toBe(true);
    expect(whole.maxInFlight).toBeLessThanOrEqual(MAX_CONCURRENT);
    expect(whole.maxPerSlidingSecond).toBeLessThanOrEqual(MAX_PER_SECOND);
    // Serving again once shared: the upstream gets requests after the failover.
    expect(after.arrivals).toBeGreaterThan(0);
  });
});
