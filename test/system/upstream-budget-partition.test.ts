/**
 * The upstream budget's stated bounds when Redis fails for some replicas or for all of them
 * (docs/limits.md#the-upstream-budget, docs/architecture.md#the-upstream-budget), counted at the upstream
 * (the sandbox, in its own process). Three replicas share one Redis, `maxConcurrent` 6 and
 * `maxPerSecond` 30 for all of them (a share of 2 and 10 each), 30 clients on cold keys, an
 * upstream that takes 200 ms; one replica reaches Redis through a TCP gate. The table's bounds are
 * `upstream.budgetCutOff: wait`'s, which this suite sets; the default's (`share`) are counted by
 * test/system/redis-outage.test.ts.
 *
 * - One replica cut off (the gate closed), the others not: at most `maxConcurrent` + its share in
 *   flight, `maxPerSecond` + its share in any second; the others keep the shared ledger.
 * - After it rejoins: within `maxConcurrent` and `maxPerSecond` again.
 * - Redis down for everyone: within `maxConcurrent` and `maxPerSecond` (the shares add up to no
 *   more); and within them again once Redis is back, empty.
 * - As production starts them: three replicas started at once on a Redis whose operator state is
 *   settled, one cut off 0.5–3 s after it is ready (a delay drawn each run, in the figures): within
 *   the caps and its share from its first request on (docs/limits.md#the-replica-count).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mintDevToken } from '../../src/cli/dev-credentials.js';
import { coldTargets } from '../helpers/cold-targets.js';
import { recordFigure } from '../helpers/figures.js';
import { closedLoop, type LoadResult } from '../helpers/load.js';
import { type RedisServer, startRedis } from '../helpers/redis.js';
import {
  budgetMode,
  type Replica,
  type ReplicaEnv,
  replicaConfig,
  startReplica,
  unmetLimits,
  until,
} from '../helpers/replicas.js';
import { phaseOf, type SandboxProcess, startSandboxProcess } from '../helpers/sandbox-process.js';
import { settledOperatorState } from '../helpers/shared-redis.js';
import { startTcpGate, type TcpGate } from '../helpers/tcp-gate.js';

const secret = 'upstream budget partition: thirty-two bytes at least';
const MAX_CONCURRENT = 6;
const MAX_PER_SECOND = 30;
const REPLICAS = 3;
const SHARE_CONCURRENT = Math.floor(MAX_CONCURRENT / REPLICAS);
const SHARE_PER_SECOND = Math.floor(MAX_PER_SECOND / REPLICAS);
const CLIENTS = 30;
const TIMEOUT_SECONDS = 1;
/** How long each measured phase runs on its share or shared, ms. */
const PHASE_MS = 2_500;

let redis: RedisServer;
let gate: TcpGate;
let sandbox: SandboxProcess;
let replicas: Replica[] = [];
let token = '';
/** The replicas' environment but Redis: what the start-up case starts its own with. */
let suiteEnv: Omit<ReplicaEnv, 'REDIS_URL'> = { UPSTREAM_URL: '', JWT_SECRET: '' };

const coldTarget = coldTargets(3_000_000);

function modesAre(targets: readonly Replica[], mode: string): () => Promise<boolean> {
  return async () => (await Promise.all(targets.map(budgetMode))).every((m) => m === mode);
}

const pause = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** A load on every replica (the suite's, or `targets`) until `stop()`. */
function loadAll(targets?: readonly Replica[]): { readonly done: Promise<LoadResult>; stop(): void } {
  let stopped = false;
  const done = closedLoop({
    connections: CLIENTS,
    durationMs: 120_000,
    next: (i) => {
      const on = targets ?? replicas;
      return { base: on[i % on.length]?.url ?? '', path: coldTarget(), token };
    },
    stopWhen: () => stopped,
  });
  return {
    done,
    stop() {
      stopped = true;
    },
  };
}

beforeAll(async () => {
  redis = await startRedis();
  gate = await startTcpGate(redis.port);
  sandbox = await startSandboxProcess(secret);
  token = await mintDevToken({ company: 1, secret });
  const config = replicaConfig(
    [
      `upstream: { maxConcurrent: ${String(MAX_CONCURRENT)}, maxPerSecond: ${String(MAX_PER_SECOND)}, maxQueueWait: 1, timeout: ${String(TIMEOUT_SECONDS)}, budgetCutOff: wait }`,
      unmetLimits(REPLICAS),
    ].join('\n'),
  );
  const env = { UPSTREAM_URL: sandbox.url, JWT_SECRET: secret, CONFIG_FILE: config };
  suiteEnv = env;
  replicas = await Promise.all([
    startReplica({ ...env, REDIS_URL: gate.redisUrl }),
    startReplica({ ...env, REDIS_URL: redis.url }),
    startReplica({ ...env, REDIS_URL: redis.url }),
  ]);
  await until(modesAre(replicas, 'shared'), 'every replica on the shared ledger', 10_000);
});

afterAll(async () => {
  await Promise.all(replicas.map((r) => r.process.stop('SIGKILL')));
  await sandbox?.close();
  await gate?.close();
  await redis?.stop();
});

describe('the upstream budget when Redis fails for one replica or for all', () => {
  it('one replica cut off: within the caps and its share, then within the caps once it rejoins', {
    timeout: 60_000,
  }, async () => {
    const [cutOff, ...others] = replicas;
    if (cutOff === undefined) throw new Error('no replica');
    await sandbox.reset();
    await sandbox.setFaults({ latencyMs: 200 });
    const load = loadAll();
    await pause(PHASE_MS);
    gate.cut();
    await until(modesAre([cutOff], 'local'), 'the cut-off replica on its share', 15_000);
    const localFrom = Date.now();
    expect(await modesAre(others, 'shared')()).toBe(true);
    await pause(PHASE_MS);
    gate.restore();
    await until(modesAre(replicas, 'shared'), 'every replica back on the shared ledger', 10_000);
    const rejoinedAt = Date.now();
    await pause(PHASE_MS);
    load.stop();
    const result = await load.done;
    const stats = await sandbox.stats();
    const whole = phaseOf(stats, 0, Number.POSITIVE_INFINITY);
    const local = phaseOf(stats, localFrom, rejoinedAt);
    const rejoined = phaseOf(stats, rejoinedAt, Number.POSITIVE_INFINITY);
    recordFigure('budget-partition', 'one replica cut off', { whole, local, rejoined, byStatus: result.byStatus });
    expect(result.errors).toBe(0);
    expect(whole.maxInFlight).toBeLessThanOrEqual(MAX_CONCURRENT + SHARE_CONCURRENT);
    expect(whole.maxPerSlidingSecond).toBeLessThanOrEqual(MAX_PER_SECOND + SHARE_PER_SECOND);
    expect(local.arrivals).toBeGreaterThan(0);
    // The rejoin registered what the replica held: from the moment all share again, the caps.
    expect(rejoined.maxInFlight).toBeLessThanOrEqual(MAX_CONCURRENT);
    expect(phaseOf(stats, rejoinedAt + 1_000, Number.POSITIVE_INFINITY).maxPerSlidingSecond).toBeLessThanOrEqual(
      MAX_PER_SECOND,
    );
  });

  it('Redis down for everyone: the shares within the caps; back within them once Redis is back, empty', {
    timeout: 60_000,
  }, async () => {
    await sandbox.reset();
    await sandbox.setFaults({ latencyMs: 200 });
    const load = loadAll();
    await pause(PHASE_MS);
    await redis.kill();
    await until(modesAre(replicas, 'local'), 'every replica on its share', 15_000);
    await pause(PHASE_MS);
    await redis.restart();
    await until(modesAre(replicas, 'shared'), 'every replica back on the shared ledger', 15_000);
    const backAt = Date.now();
    await pause(PHASE_MS);
    load.stop();
    const result = await load.done;
    const stats = await sandbox.stats();
    const whole = phaseOf(stats, 0, Number.POSITIVE_INFINITY);
    recordFigure('budget-partition', 'Redis down for everyone', {
      whole,
      back: phaseOf(stats, backAt, Number.POSITIVE_INFINITY),
      byStatus: result.byStatus,
    });
    expect(result.errors).toBe(0);
    expect(whole.maxInFlight).toBeLessThanOrEqual(MAX_CONCURRENT);
    expect(whole.maxPerSlidingSecond).toBeLessThanOrEqual(MAX_PER_SECOND);
    expect(phaseOf(stats, backAt, Number.POSITIVE_INFINITY).arrivals).toBeGreaterThan(0);
  });
});

describe('a replica cut off within seconds of its start', () => {
  it('three started at once on a settled operator state, one cut off 0.5–3 s after it is ready: within the caps and its share', {
    timeout: 60_000,
  }, async () => {
    const own = await startRedis();
    const ownGate = await startTcpGate(own.port);
    const started: Replica[] = [];
    try {
      await settledOperatorState(own);
      started.push(
        ...(await Promise.all([
          startReplica({ ...suiteEnv, REDIS_URL: ownGate.redisUrl }),
          startReplica({ ...suiteEnv, REDIS_URL: own.url }),
          startReplica({ ...suiteEnv, REDIS_URL: own.url }),
        ])),
      );
      const readyAt = Date.now();
      const cutAfterMs = 500 + Math.floor(Math.random() * 2_500);
      const [cutOff] = started;
      if (cutOff === undefined) throw new Error('no replica');
      await sandbox.reset();
      await sandbox.setFaults({ latencyMs: 200 });
      const load = loadAll(started);
      await pause(Math.max(0, readyAt + cutAfterMs - Date.now()));
      ownGate.cut();
      await until(modesAre([cutOff], 'local'), 'the cut-off replica on its share', 15_000);
      await pause(PHASE_MS);
      load.stop();
      const result = await load.done;
      const whole = phaseOf(await sandbox.stats(), 0, Number.POSITIVE_INFINITY);
      recordFigure('budget-partition', 'cut off soon after its start', {
        cutAfterMs,
        whole,
        byStatus: result.byStatus,
      });
      expect(result.errors).toBe(0);
      expect(whole.arrivals).toBeGreaterThan(0);
      expect(whole.maxInFlight, `cut ${String(cutAfterMs)} ms after ready`).toBeLessThanOrEqual(
        MAX_CONCURRENT + SHARE_CONCURRENT,
      );
      expect(whole.maxPerSlidingSecond, `cut ${String(cutAfterMs)} ms after ready`).toBeLessThanOrEqual(
        MAX_PER_SECOND + SHARE_PER_SECOND,
      );
    } finally {
      await Promise.all(started.map((r) => r.process.stop('SIGKILL')));
      await ownGate.close();
      await own.stop();
    }
  });
});
