/**
 * The upstream budget under sustained overload, on one Redis and on a Redis Cluster:
 * three replicas, `maxConcurrent` 5 and `maxPerSecond` 20 for all of them, 60 clients asking for
 * cold keys as fast as they are answered, an upstream that takes 200 ms. Two runs back to back.
 *
 * What must hold, counted at the upstream (the sandbox, in its own process): never more than 5 at
 * once, never more than 20 starts in any second; the budget used in both runs (a request that gives
 * up consumes nothing, so the line never fills with dead waiters: at least half the rate, where
 * that bug left a fifth; the spacing of starts allows 1 000 / 1 100 of it at most); what cannot get
 * a slot is a 503 with Retry-After; and the moment the overload ends, a normal load is served at
 * once. On the cluster, new limits are taken from the config at every restart and on SIGHUP.
 */

import { writeFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mintDevToken } from '../../src/cli/dev-credentials.js';
import { coldTargets } from '../helpers/cold-targets.js';
import { recordFigure, scaleSeconds } from '../helpers/figures.js';
import { getWithToken } from '../helpers/http.js';
import { closedLoop } from '../helpers/load.js';
import { type Replica, replicaConfig, startReplica, startReplicas, unmetLimits } from '../helpers/replicas.js';
import { phaseOf, type SandboxProcess, startSandboxProcess } from '../helpers/sandbox-process.js';
import { REDIS_TOPOLOGIES, type SharedRedis, settledOperatorState, startSharedRedis } from '../helpers/shared-redis.js';

const secret = 'upstream budget overload: thirty-two bytes at least';
const MAX_CONCURRENT = 5;
const MAX_PER_SECOND = 20;
const CLIENTS = 60;
const SECONDS = scaleSeconds(3);

const coldTarget = coldTargets(1_000_000);

/** The upstream's starts per second over the whole seconds inside [from, to) (ms since the epoch). */
function meanStartsPerSecond(startsBySecond: Readonly<Record<string, number>>, from: number, to: number): number {
  const first = Math.ceil(from / 1000);
  const last = Math.floor(to / 1000); // exclusive
  let starts = 0;
  for (let second = first; second < last; second++) starts += startsBySecond[String(second)] ?? 0;
  return last > first ? starts / (last - first) : 0;
}

describe.each(REDIS_TOPOLOGIES)('the upstream budget under overload (%s Redis)', (topology) => {
  let redis: SharedRedis;
  let sandbox: SandboxProcess;
  let replicas: Replica[] = [];
  let token = '';

  beforeAll(async () => {
    redis = await startSharedRedis(topology);
    await settledOperatorState(redis);
    sandbox = await startSandboxProcess(secret);
    token = await mintDevToken({ company: 1, secret });
    replicas = await startReplicas(
      3,
      { UPSTREAM_URL: sandbox.url, JWT_SECRET: secret, ...redis.env },
      [
        `upstream: { maxConcurrent: ${String(MAX_CONCURRENT)}, maxPerSecond: ${String(MAX_PER_SECOND)}, maxQueueWait: 2 }`,
        unmetLimits(3),
      ].join('\n'),
    );
  });

  afterAll(async () => {
    await Promise.all(replicas.map((r) => r.process.stop('SIGKILL')));
    await sandbox?.close();
    await redis?.stop();
  });

  /** An overload of `seconds` on every replica, at an upstream that takes `latencyMs`; its figures there. */
  async function overload(
    seconds: number,
    latencyMs: number,
  ): Promise<{
    perSecond: number;
    maxInFlight: number;
    maxPerSlidingSecond: number;
    byStatus: Readonly<Record<string, number>>;
    errors: number;
  }> {
    await sandbox.reset();
    await sandbox.setFaults({ latencyMs });
    const startedAt = Date.now();
    const load = await closedLoop({
      connections: CLIENTS,
      durationMs: seconds * 1000,
      next: (i) => ({ base: replicas[i % replicas.length]?.url ?? '', path: coldTarget(), token }),
    });
    const stats = await sandbox.stats();
    const phase = phaseOf(stats, 0, Number.POSITIVE_INFINITY);
    return {
      perSecond: meanStartsPerSecond(stats.startsBySecond, startedAt, startedAt + seconds * 1000),
      maxInFlight: phase.maxInFlight,
      maxPerSlidingSecond: phase.maxPerSlidingSecond,
      byStatus: load.byStatus,
      errors: load.errors,
    };
  }

  it('uses the budget in two runs back to back, never over the caps, then serves a normal load at once', {
    timeout: (SECONDS * 2 + 30) * 1000,
  }, async () => {
    for (const run of [1, 2]) {
      const figures = await overload(SECONDS, 200);
      recordFigure('budget-overload', `${topology} run ${String(run)}`, figures);
      expect(figures.errors).toBe(0);
      // Every answer is a page or the budget's refusal; nothing else.
      expect(Object.keys(figures.byStatus).sort()).toEqual(['200', '503']);
      expect(figures.maxInFlight).toBeLessThanOrEqual(MAX_CONCURRENT);
      expect(figures.maxPerSlidingSecond).toBeLessThanOrEqual(MAX_PER_SECOND);
      expect(figures.perSecond).toBeGreaterThanOrEqual(MAX_PER_SECOND / 2);
    }
    // The overload is over: nothing of it is left waiting, so the next requests get slots at once.
    await sandbox.reset();
    for (let i = 0; i < 10; i++) {
      const answer = await getWithToken(replicas[i % replicas.length]?.url ?? '', coldTarget(), token);
      expect(answer.status).toBe(200);
    }
    expect((await sandbox.stats()).served).toBe(10);
  });

  // What a restart and SIGHUP read is the config, the same on either topology: once, on the
  // cluster, where the shared ledger outlives the replicas' restarts across its masters.
  if (topology !== 'cluster') return;
  it('takes new limits from the config at every restart, and on SIGHUP', {
    timeout: (SECONDS * 2 + 40) * 1000,
  }, async () => {
    const budget = (maxConcurrent: number, maxPerSecond: number): string =>
      [
        `upstream: { maxConcurrent: ${String(maxConcurrent)}, maxPerSecond: ${String(maxPerSecond)}, maxQueueWait: 2 }`,
        unmetLimits(3),
      ].join('\n');
    // Every replica restarted with lower limits: nothing of the earlier ones survives them.
    await Promise.all(replicas.map((r) => r.process.stop('SIGTERM')));
    const file = replicaConfig(budget(3, 10));
    replicas = await Promise.all(
      [1, 2, 3].map(() =>
        startReplica({ UPSTREAM_URL: sandbox.url, JWT_SECRET: secret, CONFIG_FILE: file, ...redis.env }),
      ),
    );
    const restarted = await overload(SECONDS, 100);
    recordFigure('budget-overload', `${topology} after a restart with 3 / 10`, restarted);
    expect(restarted.maxInFlight).toBeLessThanOrEqual(3);
    expect(restarted.maxPerSlidingSecond).toBeLessThanOrEqual(10);
    expect(restarted.perSecond).toBeGreaterThanOrEqual(10 / 2);

    // Raised on SIGHUP, without a restart.
    writeFileSync(file, budget(4, 30));
    await Promise.all(
      replicas.map((r) => {
        const reloaded = r.process.waitFor(/"msg":"config reloaded"/);
        r.process.child.kill('SIGHUP');
        return reloaded;
      }),
    );
    const raised = await overload(SECONDS, 100);
    recordFigure('budget-overload', `${topology} after SIGHUP with 4 / 30`, raised);
    expect(raised.maxInFlight).toBeLessThanOrEqual(4);
    expect(raised.maxPerSlidingSecond).toBeLessThanOrEqual(30);
    expect(raised.perSecond).toBeGreaterThanOrEqual(30 / 2);
  });
});
